//! Who opens a landing URL: a person, who is counted and sent to a member, or a machine, which
//! is answered without spending a slot (issue 33, item 3). A slot a machine took would be a
//! customer the member never gets, and a machine that is answered with a redirect could be
//! used to learn the order.
//!
//! Told from the request alone, no read: a `HEAD`; a prefetch or prerender (`Sec-Purpose`,
//! `Purpose`, `X-Purpose`, `X-Moz`: the page may never be shown); a link-preview fetcher or
//! crawler by its User-Agent. Only the User-Agent's first `USER_AGENT_READ` bytes are looked at,
//! and only for the markers below. WeChat's and WeCom's own browsers (`MicroMessenger`,
//! `wxwork`) are people. A machine that sends a browser's User-Agent is counted as a person:
//! nothing in the request tells it apart.

/// How many bytes of the User-Agent are looked at; the markers sit near its start.
pub const USER_AGENT_READ: usize = 512;
/// How many bytes of a purpose header are looked at.
pub const PURPOSE_READ: usize = 64;

/// Lowercase markers of the link-preview fetchers and crawlers that announce themselves. A
/// bare "bot" is not one: phone makers' names hold it (`CUBOT X30`), and a person sent a
/// neutral page instead of a member is a customer lost.
const MACHINE_MARKERS: &[&str] = &[
    "bot/",
    "bot-",
    "googlebot",
    "bingbot",
    "applebot",
    "twitterbot",
    "telegrambot",
    "slackbot",
    "discordbot",
    "linkedinbot",
    "yandexbot",
    "redditbot",
    "petalbot",
    "pinterestbot",
    "spider",
    "crawler",
    "facebookexternalhit",
    "facebot",
    "meta-externalagent",
    "whatsapp/",
    "skypeuripreview",
    "embedly",
    "iframely",
    "vkshare",
    "preview",
    "headlesschrome",
];

/// Who a request comes from, as far as it tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opener {
    /// Someone opening the link: counted, and sent to a member.
    Person,
    /// Answered without a write.
    Machine(Machine),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Machine {
    /// A `HEAD`: nobody is shown anything.
    Head,
    /// A browser's prefetch or prerender: the person's own visit, if they do open the link,
    /// comes after it and is the one counted.
    Prefetch,
    /// A link-preview fetcher or crawler by its User-Agent.
    Crawler,
}

/// The parts of a request the page reads to tell a person from a machine, as raw header bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Request<'a> {
    pub head: bool,
    pub user_agent: Option<&'a [u8]>,
    /// `Sec-Purpose`, `Purpose`, `X-Purpose`, `X-Moz`, whichever were sent.
    pub purposes: &'a [&'a [u8]],
}

impl Opener {
    pub fn of(request: &Request<'_>) -> Self {
        if request.head {
            return Self::Machine(Machine::Head);
        }
        let prefetch = request.purposes.iter().any(|purpose| {
            let purpose = lower(purpose, PURPOSE_READ);
            ["prefetch", "prerender", "preview"]
                .iter()
                .any(|marker| purpose.contains(marker))
        });
        if prefetch {
            return Self::Machine(Machine::Prefetch);
        }
        let crawler = request.user_agent.is_some_and(|agent| {
            let agent = lower(agent, USER_AGENT_READ);
            MACHINE_MARKERS.iter().any(|marker| agent.contains(marker))
        });
        if crawler {
            return Self::Machine(Machine::Crawler);
        }
        Self::Person
    }
}

/// The first `bound` bytes, ASCII-lowercased; other bytes stand as `?`, which no marker holds.
fn lower(bytes: &[u8], bound: usize) -> String {
    bytes
        .iter()
        .take(bound)
        .map(|b| {
            if b.is_ascii() {
                char::from(b.to_ascii_lowercase())
            } else {
                '?'
            }
        })
        .collect()
}
