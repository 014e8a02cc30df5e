//! Source and trusted-proxy parsing (`SourcePolicy::parse`, `parse_list`, `client_address`),
//! through their public path: `ReceiverConfig::set_sources`, `set_trusted_proxies` and
//! `Receiver::authenticate`, on any lists, peer addresses and `X-Forwarded-For` headers.
//!
//! Properties, against a model written with std's address types and mask arithmetic of its own:
//! - nothing panics, whatever the bytes; a refusal is `ForbiddenSource` (or the setting's
//!   `InvalidArgument`, naming it);
//! - a list of well-formed items is accepted, except a v6 range covering the IPv4-mapped block in
//!   part (refused); the model says which;
//! - an address is allowed by a policy built from a list containing exactly that address (in any
//!   of its spellings: compressed, uppercase, expanded, `/32` or `/128`, IPv4-mapped), and an
//!   address is allowed exactly when the model finds it in one of the list's ranges;
//! - `X-Forwarded-For` from a peer that is not a trusted proxy changes nothing; from a trusted
//!   one, the client is the right-most hop that is not a trusted proxy, as the model reads it.
#![no_main]

use std::net::IpAddr;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use slotpartner::{ErrorKind, Receiver, ReceiverConfig, Request};

const TOKEN: &str = "6f1c2a3e-8b7d-4c5e-9f10-2a3b4c5d6e7f";
const STAGING: [&str; 2] = ["34.254.138.20", "34.254.59.104"];
const PRODUCTION: [&str; 5] = ["18.203.30.17", "18.202.194.158", "18.203.7.167", "34.248.216.129", "18.203.175.80"];

/// How an address is written.
#[derive(Arbitrary, Debug, Clone, Copy)]
enum Form {
    Plain,
    Upper,
    Expanded,
    Host,
    Mapped,
    Padded,
}

fn write(addr: IpAddr, form: Form) -> String {
    match (addr, form) {
        (_, Form::Plain) => addr.to_string(),
        (_, Form::Upper) => addr.to_string().to_uppercase(),
        (IpAddr::V6(a), Form::Expanded) => a.segments().map(|s| format!("{s:x}")).join(":"),
        (IpAddr::V4(_), Form::Host) => format!("{addr}/32"),
        (IpAddr::V6(_), Form::Host) => format!("{addr}/128"),
        (IpAddr::V4(a), Form::Mapped) => format!("::ffff:{a}"),
        (_, Form::Padded) => format!(" \t{addr} "),
        _ => addr.to_string(),
    }
}

#[derive(Arbitrary, Debug, Clone)]
enum Item {
    Addr(IpAddr, Form),
    Net(IpAddr, u8),
    Staging,
    Production,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Sep {
    Comma,
    CommaSpace,
    SpaceComma,
}

#[derive(Arbitrary, Debug)]
enum Hop {
    Addr(IpAddr, Form),
    Raw(String),
}

#[derive(Arbitrary, Debug)]
struct Input {
    sources: Vec<Item>,
    seps: Vec<Sep>,
    /// The address the list holds exactly, and where.
    wanted: IpAddr,
    wanted_form: Form,
    position: u8,
    peer_form: Form,
    /// Another peer, checked against the model.
    other: IpAddr,
    trusted: Vec<Item>,
    forwarded: Vec<Hop>,
    /// Anything at all, through the same paths.
    raw_sources: String,
    raw_trusted: String,
    raw_remote: Option<Vec<u8>>,
    raw_forwarded: Option<Vec<u8>>,
}

/// A range as the model keeps it: IPv4 or IPv6, network bits and prefix.
#[derive(Debug, Clone, Copy)]
enum Net {
    V4(u32, u8),
    V6(u128, u8),
}

fn mask4(p: u8) -> u32 {
    if p == 0 { 0 } else { u32::MAX << (32 - u32::from(p)) }
}

fn mask6(p: u8) -> u128 {
    if p == 0 { 0 } else { u128::MAX << (128 - u32::from(p)) }
}

const MAPPED: u128 = 0xffff_0000_0000;

/// The range an item names (`prefix` `None`: a single address), or `None` when the list must be
/// refused for it.
fn model_net(addr: IpAddr, prefix: Option<u8>) -> Option<Net> {
    let Some(p) = prefix else {
        return Some(match addr.to_canonical() {
            IpAddr::V4(a) => Net::V4(a.to_bits(), 32),
            IpAddr::V6(a) => Net::V6(a.to_bits(), 128),
        });
    };
    match addr {
        IpAddr::V4(a) => Some(Net::V4(a.to_bits() & mask4(p), p)),
        IpAddr::V6(a) => {
            let n = a.to_bits() & mask6(p);
            if p >= 96 && n >> 32 == MAPPED >> 32 {
                Some(Net::V4(n as u32 & mask4(p - 96), p - 96))
            } else if p > 0 && p < 96 && MAPPED & mask6(p) == n {
                None
            } else {
                Some(Net::V6(n, p))
            }
        }
    }
}

fn contains(net: Net, addr: IpAddr) -> bool {
    match (net, addr.to_canonical()) {
        (Net::V4(n, p), IpAddr::V4(a)) => a.to_bits() & mask4(p) == n,
        (Net::V6(n, p), IpAddr::V6(a)) => a.to_bits() & mask6(p) == n,
        _ => false,
    }
}

/// An item's text and the ranges the model reads it as (`None`: the list is refused).
fn item(i: &Item, named: bool) -> (String, Option<Vec<Net>>) {
    let named_nets = |list: &[&str]| list.iter().map(|a| model_net(a.parse().unwrap(), None)).collect();
    match i {
        Item::Addr(a, form) => (write(*a, *form), Some(vec![model_net(*a, None).expect("a host")])),
        Item::Net(a, p) => {
            let p = p % if a.is_ipv4() { 33 } else { 129 };
            (format!("{a}/{p}"), model_net(*a, Some(p)).map(|n| vec![n]))
        }
        Item::Staging => ("staging".to_owned(), if named { named_nets(&STAGING) } else { None }),
        Item::Production => ("production".to_owned(), if named { named_nets(&PRODUCTION) } else { None }),
    }
}

fn join(items: &[String], seps: &[Sep]) -> String {
    let mut out = String::new();
    for (i, text) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(match seps.get(i % seps.len().max(1)).copied().unwrap_or(Sep::Comma) {
                Sep::Comma => ",",
                Sep::CommaSpace => ", ",
                Sep::SpaceComma => " ,",
            });
        }
        out.push_str(text);
    }
    out
}

fn receiver(sources: &str, trusted: &str) -> Result<Receiver, slotpartner::Error> {
    let mut config = ReceiverConfig::default();
    config.add_token(TOKEN).expect("a valid token");
    config.set_sources(sources)?;
    config.set_trusted_proxies(trusted)?;
    Receiver::new(config)
}

fn authenticate(receiver: &Receiver, remote: Option<&[u8]>, forwarded: Option<&[u8]>) -> Result<(), ErrorKind> {
    let request = Request { token: Some(TOKEN.as_bytes()), remote_addr: remote, forwarded_for: forwarded, body: b"" };
    receiver.authenticate(&request).map_err(|e| {
        assert_eq!(e.kind, ErrorKind::ForbiddenSource, "{e}");
        assert_eq!(e.field, "remote_addr");
        e.kind
    })
}

/// The client the model reads from a trusted peer's header: right-most hop not trusted.
fn model_client(peer: IpAddr, forwarded: Option<&[Option<IpAddr>]>, trusted: &[Net]) -> Option<IpAddr> {
    let trusted_addr = |a: IpAddr| trusted.iter().any(|n| contains(*n, a));
    let (Some(hops), true) = (forwarded, trusted_addr(peer)) else { return Some(peer) };
    let mut client = peer;
    for hop in hops.iter().rev() {
        client = (*hop)?;
        if !trusted_addr(client) {
            break;
        }
    }
    Some(client)
}

fuzz_target!(|input: Input| {
    // Anything at all: no panic, and refusals of the right kind.
    match receiver(&input.raw_sources, &input.raw_trusted) {
        Ok(r) => {
            let _ = authenticate(&r, input.raw_remote.as_deref(), input.raw_forwarded.as_deref());
        }
        Err(e) => {
            assert_eq!(e.kind, ErrorKind::InvalidArgument);
            assert!(e.field == "sources" || e.field == "trusted_proxies", "{e}");
        }
    }

    // Well-formed lists, the wanted address among them.
    let mut texts = Vec::new();
    let mut nets = Some(Vec::new());
    for i in &input.sources {
        let (text, n) = item(i, true);
        texts.push(text);
        nets = nets.zip(n).map(|(mut all, n)| {
            all.extend(n);
            all
        });
    }
    let at = usize::from(input.position) % (texts.len() + 1);
    texts.insert(at, write(input.wanted, input.wanted_form));
    if let Some(nets) = &mut nets {
        nets.push(model_net(input.wanted, None).expect("a host"));
    }
    let sources = join(&texts, &input.seps);
    let mut trusted_texts = Vec::new();
    let mut trusted_nets = Some(Vec::new());
    for i in &input.trusted {
        let (text, n) = item(i, false);
        trusted_texts.push(text);
        trusted_nets = trusted_nets.zip(n).map(|(mut all, n)| {
            all.extend(n);
            all
        });
    }
    let trusted = join(&trusted_texts, &input.seps);

    // Without trusted proxies: the list alone decides.
    let alone = receiver(&sources, "");
    let Some(nets) = nets else {
        let e = alone.err().unwrap_or_else(|| panic!("{sources:?} accepted"));
        assert_eq!((e.kind, e.field.as_str()), (ErrorKind::InvalidArgument, "sources"), "{e}");
        return;
    };
    let alone = alone.unwrap_or_else(|e| panic!("{sources:?} refused: {e}"));
    let peer = write(input.wanted, input.peer_form).trim().trim_end_matches("/32").trim_end_matches("/128").to_owned();
    let peer = if peer.parse::<IpAddr>().is_ok() { peer } else { input.wanted.to_string() };
    assert_eq!(authenticate(&alone, Some(peer.as_bytes()), None), Ok(()), "{peer} not allowed by {sources:?}");
    let other = input.other.to_string();
    let expected = nets.iter().any(|n| contains(*n, input.other));
    assert_eq!(authenticate(&alone, Some(other.as_bytes()), None).is_ok(), expected, "{other} by {sources:?}");
    // An untrusted peer's header is ignored unread, whatever it holds.
    let forwarded_raw = input.raw_forwarded.as_deref().unwrap_or(b"\xff, 1.2.3.4");
    assert_eq!(authenticate(&alone, Some(other.as_bytes()), Some(forwarded_raw)).is_ok(), expected);

    // With trusted proxies.
    let with_proxies = receiver(&sources, &trusted);
    let Some(trusted_nets) = trusted_nets else {
        let e = with_proxies.err().unwrap_or_else(|| panic!("trusted {trusted:?} accepted"));
        assert_eq!((e.kind, e.field.as_str()), (ErrorKind::InvalidArgument, "trusted_proxies"), "{e}");
        return;
    };
    let with_proxies = with_proxies.unwrap_or_else(|e| panic!("trusted {trusted:?} refused: {e}"));
    let hops: Vec<Option<IpAddr>> = input
        .forwarded
        .iter()
        .map(|h| match h {
            Hop::Addr(a, form) => {
                let text = write(*a, *form);
                text.trim().parse::<IpAddr>().ok().map(|p| p.to_canonical())
            }
            Hop::Raw(s) => s.trim().parse::<IpAddr>().ok().map(|p| p.to_canonical()),
        })
        .collect();
    let header: Vec<String> = input
        .forwarded
        .iter()
        .map(|h| match h {
            Hop::Addr(a, form) => write(*a, *form),
            Hop::Raw(s) => s.clone(),
        })
        .collect();
    let header = header.join(",");
    // A raw hop holding a comma is more than one hop: leave those to the no-panic part.
    if input.forwarded.iter().any(|h| matches!(h, Hop::Raw(s) if s.contains(','))) {
        return;
    }
    let forwarded = (!input.forwarded.is_empty()).then_some(header.as_bytes());
    let hops = forwarded.map(|_| hops.as_slice());
    for peer in [input.other, input.wanted] {
        let client = model_client(peer.to_canonical(), hops, &trusted_nets);
        let expected = client.is_some_and(|c| nets.iter().any(|n| contains(*n, c)));
        let got = authenticate(&with_proxies, Some(peer.to_string().as_bytes()), forwarded);
        assert_eq!(got.is_ok(), expected, "peer {peer}, header {header:?}, trusted {trusted:?}, sources {sources:?}");
    }
});
