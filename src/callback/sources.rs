//! The source address allow-list: the spec's staging and production addresses, custom addresses
//! and CIDR ranges, or any source; forwarding headers only from configured trusted proxies.

use std::net::{IpAddr, Ipv4Addr};

use ipnet::IpNet;

use crate::error::{Error, ErrorKind, Result};

/// The service's staging callback source addresses (spec section 5).
pub const STAGING: &[&str] = &["34.254.138.20", "34.254.59.104"];
/// The service's production callback source addresses (spec section 5).
pub const PRODUCTION: &[&str] = &["18.203.30.17", "18.202.194.158", "18.203.7.167", "34.248.216.129", "18.203.175.80"];

/// Which source addresses may deliver callbacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourcePolicy {
    /// Any source (for development, or when a firewall in front already filters).
    Any,
    /// Only these addresses and ranges.
    Only(Vec<IpNet>),
}

impl SourcePolicy {
    /// Parses `any`, or a comma-separated list of `staging`, `production`, IPv4/IPv6 addresses
    /// and CIDR ranges (`staging,10.1.2.0/24,::1`). `field` names the setting in errors.
    pub fn parse(field: &str, spec: &str) -> Result<SourcePolicy> {
        if spec.trim() == "any" {
            return Ok(SourcePolicy::Any);
        }
        let mut nets = Vec::new();
        for item in spec.split(',').map(str::trim) {
            match item {
                "staging" => nets.extend(STAGING.iter().map(|a| host_net(a.parse().expect("built-in address")))),
                "production" => nets.extend(PRODUCTION.iter().map(|a| host_net(a.parse().expect("built-in address")))),
                _ => nets.push(parse_net(field, item)?),
            }
        }
        Ok(SourcePolicy::Only(nets))
    }

    /// Whether `addr` may deliver callbacks.
    pub fn allows(&self, addr: IpAddr) -> bool {
        match self {
            SourcePolicy::Any => true,
            SourcePolicy::Only(nets) => contains(nets, addr),
        }
    }
}

/// Parses a comma-separated list of addresses and CIDR ranges (an empty string gives none).
pub fn parse_list(field: &str, spec: &str) -> Result<Vec<IpNet>> {
    spec.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|item| parse_net(field, item)).collect()
}

/// The address that delivered the request: `remote_addr` (bytes, as a web server hands them
/// over; not UTF-8 is no address), or, when `remote_addr` is a trusted
/// proxy, the right-most address of `forwarded_for` (an `X-Forwarded-For` value, raw bytes)
/// that is not a trusted proxy. Forwarding headers from any other peer are ignored unread,
/// whatever their bytes; a trusted proxy's header that is not UTF-8 is refused as a source.
pub fn client_address(
    remote_addr: Option<&[u8]>,
    forwarded_for: Option<&[u8]>,
    trusted_proxies: &[IpNet],
) -> Result<IpAddr> {
    let remote = remote_addr.ok_or_else(|| forbidden("the remote address is unknown"))?;
    let mut client = match dotted_quad(remote) {
        Some(v4) => IpAddr::V4(v4),
        None => {
            let remote = std::str::from_utf8(remote)
                .map_err(|e| forbidden(format!("the remote address is not UTF-8 (byte {})", e.valid_up_to())))?;
            parse_addr(remote)
                .ok_or_else(|| forbidden(format!("the remote address {remote:?} is not an IP address")))?
        }
    };
    if let Some(forwarded) = forwarded_for.filter(|_| contains(trusted_proxies, client)) {
        let forwarded = std::str::from_utf8(forwarded).map_err(|e| {
            forbidden(format!("X-Forwarded-For from trusted proxy {client} is not UTF-8 (byte {})", e.valid_up_to()))
        })?;
        for hop in forwarded.rsplit(',').map(str::trim) {
            client = parse_addr(hop)
                .ok_or_else(|| forbidden(format!("X-Forwarded-For holds {hop:?}, not an IP address")))?;
            if !contains(trusted_proxies, client) {
                break;
            }
        }
    }
    Ok(client)
}

fn contains(nets: &[IpNet], addr: IpAddr) -> bool {
    nets.iter().any(|net| net.contains(&addr))
}

fn forbidden(problem: impl std::fmt::Display) -> Error {
    Error::field(ErrorKind::ForbiddenSource, "remote_addr", problem)
}

/// An address, with IPv4-mapped IPv6 addresses (`::ffff:1.2.3.4`) taken as the IPv4 address.
fn parse_addr(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>().ok().map(|a| a.to_canonical())
}

/// `text` as an IPv4 address when it is one exactly as std's `Ipv4Addr` parser reads it (four
/// decimal numbers 0 to 255 of one to three ASCII digits, no leading zero, separated by dots),
/// else `None`. The usual peer address, read from bytes: UTF-8 checking and std's parser cost
/// about 330 instructions a callback, this about 100.
fn dotted_quad(text: &[u8]) -> Option<Ipv4Addr> {
    let (a, rest) = octet(text)?;
    let (b, rest) = octet(rest.strip_prefix(b".")?)?;
    let (c, rest) = octet(rest.strip_prefix(b".")?)?;
    let (d, rest) = octet(rest.strip_prefix(b".")?)?;
    rest.is_empty().then_some(Ipv4Addr::new(a, b, c, d))
}

/// The decimal number 0 to 255 `text` starts with (the longest run of up to three digits, a
/// zero only alone) and the bytes after it.
fn octet(text: &[u8]) -> Option<(u8, &[u8])> {
    let digit = |byte: &u8| u16::from(byte - b'0');
    let (value, rest) = match text {
        [a @ b'1'..=b'9', b @ b'0'..=b'9', c @ b'0'..=b'9', rest @ ..] => {
            (digit(a) * 100 + digit(b) * 10 + digit(c), rest)
        }
        [a @ b'1'..=b'9', b @ b'0'..=b'9', rest @ ..] => (digit(a) * 10 + digit(b), rest),
        [a @ b'0'..=b'9', rest @ ..] => (digit(a), rest),
        _ => return None,
    };
    Some((u8::try_from(value).ok()?, rest))
}

fn host_net(addr: IpAddr) -> IpNet {
    IpNet::from(addr)
}

/// An address or CIDR range. A range of IPv4-mapped IPv6 addresses (`::ffff:10.0.0.0/104`) is
/// taken as the IPv4 range it maps (`10.0.0.0/8`), since mapped peer addresses are compared as
/// IPv4; a range that only partly covers the mapped block (prefix below 96) is refused, as it
/// could not mean what it says.
fn parse_net(field: &str, item: &str) -> Result<IpNet> {
    if let Some(addr) = parse_addr(item) {
        return Ok(host_net(addr));
    }
    let net = item.parse::<IpNet>().map(|net| net.trunc()).map_err(|_| {
        let problem = format!("{item:?} is not staging, production, any, an IP address or a CIDR range");
        Error::field(ErrorKind::InvalidArgument, field, problem)
    })?;
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.network().to_ipv4_mapped() {
            Some(v4) => Ok(IpNet::V4(ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).expect("prefix 0 to 32"))),
            None => Ok(net),
        },
        IpNet::V6(v6) if v6.contains(&std::net::Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0)) && v6.prefix_len() > 0 => {
            let problem = format!(
                "{item:?} covers IPv4-mapped addresses (::ffff:0:0/96) only in part; name the IPv4 range instead"
            );
            Err(Error::field(ErrorKind::InvalidArgument, field, problem))
        }
        _ => Ok(net),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// `dotted_quad` reads exactly what std's IPv4 parser reads, to the same address: every
    /// string of up to 7 bytes over digits, dots and a letter, and every dotted quad of numbers
    /// around the limits (255, 256, three and four digits, leading zeros, signs, blanks, none).
    #[test]
    fn dotted_quad_reads_what_std_reads() {
        let same = |text: &str| {
            assert_eq!(dotted_quad(text.as_bytes()), text.parse::<Ipv4Addr>().ok(), "{text:?}");
        };
        let alphabet = ["0", "1", "2", "5", "9", ".", "a"];
        let mut texts = vec![String::new()];
        for _ in 0..7 {
            texts = texts.iter().flat_map(|t| alphabet.iter().map(move |c| format!("{t}{c}"))).collect();
            texts.iter().for_each(|t| same(t));
        }
        let numbers = [
            "", "0", "00", "01", "010", "1", "9", "10", "99", "100", "199", "249", "250", "255", "256", "260", "300",
            "999", "1000", "+1", " 1", "1 ",
        ];
        for a in numbers {
            for b in numbers {
                for c in ["0", "255", "01", ""] {
                    for d in numbers {
                        same(&format!("{a}.{b}.{c}.{d}"));
                        same(&format!("{a}.{b}.{c}.{d}."));
                        same(&format!("{a}.{b}.{c}.{d}.1"));
                    }
                }
            }
        }
        for text in
            ["34.254.138.20", "255.255.255.255", "0.0.0.0", "::ffff:34.254.138.20", "34.254.138.20\0", "\u{0661}.1.1.1"]
        {
            same(text);
        }
    }

    #[test]
    fn named_environments_hold_the_spec_addresses() {
        let staging = SourcePolicy::parse("sources", "staging").unwrap();
        assert!(staging.allows(ip("34.254.138.20")) && staging.allows(ip("34.254.59.104")));
        assert!(!staging.allows(ip("18.203.30.17")));
        let production = SourcePolicy::parse("sources", "production").unwrap();
        assert!(PRODUCTION.iter().all(|a| production.allows(ip(a))));
        assert!(!production.allows(ip("34.254.138.20")));
    }

    #[test]
    fn custom_addresses_ranges_and_any() {
        let policy = SourcePolicy::parse("sources", "staging, 10.1.2.0/24, 2001:db8::/32, ::1").unwrap();
        assert!(policy.allows(ip("10.1.2.200")) && !policy.allows(ip("10.1.3.1")));
        assert!(policy.allows(ip("2001:db8::5")) && policy.allows(ip("::1")));
        assert!(SourcePolicy::parse("sources", "any").unwrap().allows(ip("203.0.113.9")));
        let err = SourcePolicy::parse("sources", "staging,10.0.0.300").unwrap_err();
        assert_eq!((err.kind, err.field.as_str()), (ErrorKind::InvalidArgument, "sources"));
        assert!(SourcePolicy::parse("sources", "").is_err());
    }

    #[test]
    fn mapped_ipv4_counts_as_ipv4() {
        let policy = SourcePolicy::parse("sources", "production").unwrap();
        let client = client_address(Some(b"::ffff:18.203.30.17"), None, &[]).unwrap();
        assert!(policy.allows(client));
    }

    #[test]
    fn mapped_ranges_are_taken_as_ipv4_ranges() {
        let policy = SourcePolicy::parse("sources", "::ffff:10.0.0.0/104").unwrap();
        assert_eq!(policy, SourcePolicy::Only(vec!["10.0.0.0/8".parse().unwrap()]));
        let client = client_address(Some(b"::ffff:10.1.2.3"), None, &[]).unwrap();
        assert!(policy.allows(client) && policy.allows(ip("10.9.9.9")) && !policy.allows(ip("11.0.0.1")));
        let host = SourcePolicy::parse("sources", "::ffff:18.203.30.17/128").unwrap();
        assert!(host.allows(ip("18.203.30.17")));
        let err = SourcePolicy::parse("sources", "::ffff:0:0/80").unwrap_err();
        assert!(err.message.contains("in part"), "{}", err.message);
    }

    #[test]
    fn forwarded_for_is_read_only_from_trusted_proxies() {
        let proxies = parse_list("trusted_proxies", "10.0.0.0/8").unwrap();
        let via_proxy = client_address(Some(b"10.0.0.5"), Some(b"1.2.3.4, 34.254.138.20, 10.0.0.7"), &proxies).unwrap();
        assert_eq!(via_proxy, ip("34.254.138.20"));
        let spoofed = client_address(Some(b"198.51.100.1"), Some(b"34.254.138.20"), &proxies).unwrap();
        assert_eq!(spoofed, ip("198.51.100.1"));
        let not_utf8_untrusted = client_address(Some(b"198.51.100.1"), Some(b"\xff\xfe"), &proxies).unwrap();
        assert_eq!(not_utf8_untrusted, ip("198.51.100.1"));
        let not_utf8_trusted = client_address(Some(b"10.0.0.5"), Some(b"\xff\xfe"), &proxies).unwrap_err();
        assert_eq!(not_utf8_trusted.kind, ErrorKind::ForbiddenSource);
        let untrusted = client_address(Some(b"10.0.0.5"), Some(b"34.254.138.20"), &[]).unwrap();
        assert_eq!(untrusted, ip("10.0.0.5"));
        assert_eq!(client_address(None, None, &proxies).unwrap_err().kind, ErrorKind::ForbiddenSource);
        assert_eq!(client_address(Some(b"nope"), None, &proxies).unwrap_err().kind, ErrorKind::ForbiddenSource);
    }
}
