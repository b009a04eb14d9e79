//! WeCom's callback test vectors (docs/wecom-api.md §1.8), in one place for
//! the crypto unit tests and the integration tests that post them through the route.

pub struct Settings {
    pub token: &'static str,
    pub encoding_aes_key: &'static str,
    pub corp_id: &'static str,
}

/// A signed request: URL verification (`encrypt` = echostr) or a POST's `Encrypt`.
pub struct Signed {
    pub msg_signature: &'static str,
    pub timestamp: &'static str,
    pub nonce: &'static str,
    pub encrypt: &'static str,
}

/// The official SDK sample (V1 and V2 share these settings).
pub const V1: Settings = Settings {
    token: "QDG6eK",
    encoding_aes_key: "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C",
    corp_id: "wx5823bf96d3bd56c7",
};

/// V1: URL verification; the echostr decrypts to `V1_REPLY`.
pub const V1_VERIFY: Signed = Signed {
    msg_signature: "5c45ff5e21c57e6ad56bac8758b79b1d9ac89fd3",
    timestamp: "1409659589",
    nonce: "263014780",
    encrypt:
        "P9nAzCzyDtyTWESHep1vC5X9xho/qYX3Zpb4yKa9SKld1DsH3Iyt3tP3zNdtp+4RPcs8TgAE7OaBO+FZXvnaqQ==",
};
pub const V1_REPLY: &str = "1616140317555161061";

/// V2: a POST whose plaintext (`V2_PLAINTEXT`, 284 bytes) ends in pad byte 30.
pub const V2_POST: Signed = Signed {
    msg_signature: "477715d11cdb4164915debcba66cb864d751f3e6",
    timestamp: "1409659813",
    nonce: "1372623149",
    encrypt: "RypEvHKD8QQKFhvQ6QleEB4J58tiPdvo+rtK1I9qca6aM/wvqnLSV5zEPeusUiX5L5X/0lWfrf0QADHHhGd3QczcdCUpj911L3vg3W/sYYvuJTs3TUUkSUXxaccAS0qhxchrRYt66wiSpGLYL42aM6A8dTT+6k4aSknmPj48kzJs8qLjvd4Xgpue06DOdnLxAUHzM6+kDZ+HMZfJYuR+LtwGc2hgf5gsijff0ekUNXZiqATP7PF5mZxZ3Izoun1s4zG4LUMnvw2r+KqCKIw+3IQH03v+BCA9nMELNqbSf6tiWSrXJB3LAVGUcallcrw8V2t9EL4EhzJWrQUax5wLVMNS0+rUPA3k22Ncx4XXZS9o0MBH27Bo6BpNelZpS+/uh9KsNlY6bHCmJU9p8g7m3fVKn28H3KDYA5Pl/T8Z1ptDAVe0lXdQ2YoyyH2uyPIGHBZZIs2pDBS8R07+qN+E7Q==",
};
pub const V2_PLAINTEXT: &str = "<xml><ToUserName><![CDATA[wx5823bf96d3bd56c7]]></ToUserName>\n<FromUserName><![CDATA[mycreate]]></FromUserName>\n<CreateTime>1409659813</CreateTime>\n<MsgType><![CDATA[text]]></MsgType>\n<Content><![CDATA[hello]]></Content>\n<MsgId>4561255354251345929</MsgId>\n<AgentID>218</AgentID>\n</xml>";

/// wechatpy's vectors, an independent implementation (V4 and V4b share these settings).
pub const V4: Settings = Settings {
    token: "123456",
    encoding_aes_key: "kWxPEV2UEDyxWpmPdKC3F4dgPDmOvfKX1HGnEUDS1aR",
    corp_id: "wx49f0ab532d5d035a",
};

/// V4: URL verification; with nonce `V4_WRONG_NONCE` the signature must fail.
pub const V4_VERIFY: Signed = Signed {
    msg_signature: "dd6b9c95b495b3f7e2901bfbc76c664930ffdb96",
    timestamp: "1411443780",
    nonce: "437374425",
    encrypt:
        "4ByGGj+sVCYcvGeQYhaKIk1o0pQRNbRjxybjTGblXrBaXlTXeOo1+bXFXDQQb1o6co6Yh9Bv41n7hOchLF6p+Q==",
};
pub const V4_REPLY: &str = "5927782489442352469";
pub const V4_WRONG_NONCE: &str = "437374424";

/// V4: a POST (text message `test` from `messense`) whose plaintext ends in pad byte 1.
pub const V4_POST: Signed = Signed {
    msg_signature: "74d92dfeb87ba7c714f89d98870ae5eb62dff26d",
    timestamp: "1411525903",
    nonce: "461056294",
    encrypt: "RgqEoJj5A4EMYlLvWO1F86ioRjZfaex/gePD0gOXTxpsq5Yj4GNglrBb8I2BAJVODGajiFnXBu7mCPatfjsu6IHCrsTyeDXzF6Bv283dGymzxh6ydJRvZsryDyZbLTE7rhnus50qGPMfp2wASFlzEgMW9z1ef/RD8XzaFYgm7iTdaXpXaG4+BiYyolBug/gYNx410cvkKR2/nPwBiT+P4hIiOAQqGp/TywZBtDh1yCF2KOd0gpiMZ5jSw3e29mTvmUHzkVQiMS6td7vXUaWOMZnYZlF3So2SjHnwh4jYFxdgpkHHqIrH/54SNdshoQgWYEvccTKe7FS709/5t6NMxuGhcUGAPOQipvWTT4dShyqio7mlsl5noTrb++x6En749zCpQVhDpbV6GDnTbcX2e8K9QaNWHp91eBdCRxthuL0=",
};

/// V4b: deterministic encryption of `V4B_PLAINTEXT` (a passive reply, 247 bytes) with random
/// `V4B_RANDOM`, signed as `msg_signature`.
pub const V4B_REPLY: Signed = Signed {
    msg_signature: "407518b7649e86ef23978113f92d27afa9296533",
    timestamp: "1411525903",
    nonce: "461056294",
    encrypt: "9s4gMv99m88kKTh/H8IdkOiMg6bisoy3ypwy9H4hvSPe9nsGaqyw5hhSjdYbcrKk+j3nba4HMOTzHrluLBYqxgNcBqGsL8GqxlhZgURnAtObvesEl5nZ+uBE8bviY0LWke8Zy9V/QYKxNV2FqllNXcfmstttyIkMKCCmVbCFM2JTF5wY0nFhHZSjPUL2Q1qvSUCUld+/WIXrx0oyKQmpB6o8NRrrNrsDf03oxI1p9FxUgMnwKKZeOA/uu+2IEvEBtb7muXsVbwbgX05UPPJvFurDXafG0RQyPR+mf1nDnAtQmmNOuiR5MIkdQ39xn1vWwi1O5oazPoQJz0nTYjxxEE8kv3kFxtAGVRe3ypD3WeK2XeFYFMNMpatF9XiKzHo3",
};
pub const V4B_RANDOM: &[u8; 16] = b"1234567890123456";
pub const V4B_PLAINTEXT: &str = "<xml>\n<MsgType><![CDATA[text]]></MsgType>\n<Content><![CDATA[test]]></Content>\n<FromUserName><![CDATA[wx49f0ab532d5d035a]]></FromUserName>\n<ToUserName><![CDATA[messense]]></ToUserName>\n<AgentID>1</AgentID>\n<CreateTime>1411525903</CreateTime>\n</xml>";
