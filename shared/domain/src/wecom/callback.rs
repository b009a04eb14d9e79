//! Callback envelopes (the outer `<xml>` WeCom POSTs) and the decrypted event payloads.

use quick_xml::events::{BytesCData, BytesEnd, BytesStart, BytesText, Event};
use quick_xml::{Reader, Writer};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    #[error("body is not well-formed XML: {0}")]
    Malformed(String),
    #[error("root element must be <xml>")]
    WrongRoot,
    #[error("required element <{0}> is missing or empty")]
    Missing(&'static str),
}

/// The direct children of a WeCom `<xml>` document, by name. Text and CDATA are both accepted
/// (WeCom's samples use either); nested elements such as `<ExtAttr>` are skipped.
pub fn parse_flat_xml(body: &str) -> Result<BTreeMap<String, String>, XmlError> {
    let mut reader = Reader::from_str(body);
    let mut fields = BTreeMap::new();
    let mut depth = 0usize;
    let mut saw_root = false;
    let mut current: Option<String> = None;
    let mut value = String::new();
    loop {
        match reader
            .read_event()
            .map_err(|e| XmlError::Malformed(e.to_string()))?
        {
            Event::Start(start) => {
                let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
                depth += 1;
                match depth {
                    1 if name == "xml" => saw_root = true,
                    1 => return Err(XmlError::WrongRoot),
                    2 => {
                        current = Some(name);
                        value.clear();
                    }
                    _ => current = None,
                }
            }
            Event::Empty(start) if depth == 1 => {
                let name = String::from_utf8_lossy(start.name().as_ref()).into_owned();
                fields.insert(name, String::new());
            }
            Event::Empty(_) if depth == 0 => return Err(XmlError::WrongRoot),
            Event::Text(text) if depth == 2 && current.is_some() => {
                let text = text
                    .unescape()
                    .map_err(|e| XmlError::Malformed(e.to_string()))?;
                value.push_str(&text);
            }
            Event::CData(data) if depth == 2 && current.is_some() => {
                value.push_str(&String::from_utf8_lossy(&data.into_inner()));
            }
            Event::End(_) => {
                if depth == 2 {
                    if let Some(name) = current.take() {
                        fields.insert(name, value.trim().to_owned());
                    }
                }
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| XmlError::Malformed("unbalanced".into()))?;
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !saw_root {
        return Err(XmlError::WrongRoot);
    }
    if depth != 0 {
        return Err(XmlError::Malformed(
            "document ended inside an element".into(),
        ));
    }
    Ok(fields)
}

/// Writes `<xml>` with one CDATA child per field, in the given order.
pub fn write_flat_xml(fields: &[(&str, &str)]) -> String {
    let mut writer = Writer::new(Vec::new());
    let write = |writer: &mut Writer<Vec<u8>>| -> std::io::Result<()> {
        writer.write_event(Event::Start(BytesStart::new("xml")))?;
        for (name, value) in fields {
            writer.write_event(Event::Start(BytesStart::new(*name)))?;
            if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
                writer.write_event(Event::Text(BytesText::new(value)))?;
            } else {
                writer.write_event(Event::CData(BytesCData::new(*value)))?;
            }
            writer.write_event(Event::End(BytesEnd::new(*name)))?;
        }
        writer.write_event(Event::End(BytesEnd::new("xml")))
    };
    write(&mut writer).expect("writing to a Vec cannot fail");
    String::from_utf8(writer.into_inner()).expect("XML written from &str is UTF-8")
}

/// The outer document of a POSTed callback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The corp id the callback is addressed to.
    pub to_user_name: String,
    pub agent_id: Option<String>,
    /// Base64 ciphertext; the signature covers exactly this text.
    pub encrypt: String,
}

impl Envelope {
    pub fn parse(body: &str) -> Result<Self, XmlError> {
        let mut fields = parse_flat_xml(body)?;
        let encrypt = fields
            .remove("Encrypt")
            .filter(|v| !v.is_empty())
            .ok_or(XmlError::Missing("Encrypt"))?;
        let to_user_name = fields
            .remove("ToUserName")
            .filter(|v| !v.is_empty())
            .ok_or(XmlError::Missing("ToUserName"))?;
        Ok(Self {
            to_user_name,
            agent_id: fields.remove("AgentID").filter(|v| !v.is_empty()),
            encrypt,
        })
    }

    pub fn to_xml(&self) -> String {
        let mut fields = vec![("ToUserName", self.to_user_name.as_str())];
        if let Some(agent) = &self.agent_id {
            fields.push(("AgentID", agent.as_str()));
        }
        fields.push(("Encrypt", self.encrypt.as_str()));
        write_flat_xml(&fields)
    }
}

/// A decrypted callback event: the fields qrsync routes and deduplicates on, plus the rest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallbackEvent {
    fields: BTreeMap<String, String>,
}

/// The fields that identify one business event. WeCom's own advice is FromUserName +
/// CreateTime, but FromUserName is always `sys` for contact events, so two adds in one
/// second would collide; these fields tell them apart while a re-delivery (same plaintext,
/// new ciphertext) still maps to the same key.
const IDENTITY_FIELDS: [&str; 13] = [
    "ToUserName",
    "MsgType",
    "Event",
    "ChangeType",
    "UserID",
    "ExternalUserID",
    "State",
    "CreateTime",
    "NewUserID",
    "Department",
    "Id",
    "Status",
    "MsgId",
];

impl CallbackEvent {
    pub fn parse(plaintext: &str) -> Result<Self, XmlError> {
        let fields = parse_flat_xml(plaintext)?;
        for required in ["ToUserName", "CreateTime"] {
            if fields.get(required).is_none_or(|v| v.is_empty()) {
                return Err(XmlError::Missing(required));
            }
        }
        if fields.get("MsgType").is_none_or(|v| v.is_empty()) {
            return Err(XmlError::Missing("MsgType"));
        }
        Ok(Self { fields })
    }

    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub fn event(&self) -> Option<&str> {
        self.field("Event")
    }

    pub fn change_type(&self) -> Option<&str> {
        self.field("ChangeType")
    }

    pub fn state(&self) -> Option<&str> {
        self.field("State")
    }

    pub fn user_id(&self) -> Option<&str> {
        self.field("UserID")
    }

    pub fn create_time(&self) -> Option<&str> {
        self.field("CreateTime")
    }

    /// The identity fields joined as `name=value` lines (absent fields are left out).
    pub fn business_key(&self) -> String {
        IDENTITY_FIELDS
            .iter()
            .filter_map(|name| self.field(name).map(|value| format!("{name}={value}\n")))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: &str = "<xml>\n\t<ToUserName><![CDATA[toUser]]></ToUserName>\n\t<FromUserName><![CDATA[sys]]></FromUserName>\n\t<CreateTime>1403610513</CreateTime>\n\t<MsgType><![CDATA[event]]></MsgType>\n\t<Event><![CDATA[change_external_contact]]></Event>\n\t<ChangeType><![CDATA[add_external_contact]]></ChangeType>\n\t<UserID><![CDATA[zhangsan]]></UserID>\n\t<ExternalUserID><![CDATA[woAJ2GCAAAXtWyujaWJHDDGi0mAAAA]]></ExternalUserID>\n\t<State><![CDATA[teststate]]></State>\n\t<WelcomeCode><![CDATA[WELCOMECODE]]></WelcomeCode>\n</xml>";

    #[test]
    fn an_add_event_exposes_its_routing_fields() {
        let event = CallbackEvent::parse(ADD).expect("documented sample parses");
        assert_eq!(event.event(), Some("change_external_contact"));
        assert_eq!(event.change_type(), Some("add_external_contact"));
        assert_eq!(event.state(), Some("teststate"));
        assert_eq!(event.user_id(), Some("zhangsan"));
        assert_eq!(event.create_time(), Some("1403610513"));
    }

    #[test]
    fn plain_text_and_cdata_values_are_equivalent() {
        let event = CallbackEvent::parse(
            "<xml><ToUserName>c</ToUserName><CreateTime>1</CreateTime><MsgType>event</MsgType><ChangeType>delete_user</ChangeType><ExtAttr><Item><Name>a</Name></Item></ExtAttr></xml>",
        )
        .expect("parses");
        assert_eq!(event.change_type(), Some("delete_user"));
        assert_eq!(
            event.field("Name"),
            None,
            "nested elements are not top-level fields"
        );
    }

    #[test]
    fn the_business_key_ignores_the_welcome_code_but_not_the_customer() {
        let first = CallbackEvent::parse(ADD).expect("parses");
        let redelivered =
            CallbackEvent::parse(&ADD.replace("WELCOMECODE", "OTHER")).expect("parses");
        let other_customer = CallbackEvent::parse(&ADD.replace("mAAAA", "mBBBB")).expect("parses");
        assert_eq!(first.business_key(), redelivered.business_key());
        assert_ne!(first.business_key(), other_customer.business_key());
    }

    #[test]
    fn malformed_documents_are_errors() {
        assert!(matches!(
            parse_flat_xml("<xml><a>1</b></xml>"),
            Err(XmlError::Malformed(_))
        ));
        assert_eq!(
            parse_flat_xml("<root><a>1</a></root>"),
            Err(XmlError::WrongRoot)
        );
        assert_eq!(parse_flat_xml("just text"), Err(XmlError::WrongRoot));
        assert!(parse_flat_xml("<xml><a>1</a>").is_err());
        assert_eq!(
            CallbackEvent::parse("<xml><ToUserName>c</ToUserName></xml>"),
            Err(XmlError::Missing("CreateTime"))
        );
    }

    #[test]
    fn an_envelope_round_trips_and_requires_its_ciphertext() {
        let envelope = Envelope {
            to_user_name: "wx5823bf96d3bd56c7".into(),
            agent_id: Some("218".into()),
            encrypt: "abc+/=".into(),
        };
        assert_eq!(Envelope::parse(&envelope.to_xml()), Ok(envelope));
        assert_eq!(
            Envelope::parse("<xml><ToUserName>x</ToUserName></xml>"),
            Err(XmlError::Missing("Encrypt"))
        );
    }
}
