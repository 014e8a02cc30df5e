//! The metrics listener's open connections, in the order they came: when they are as many as it
//! keeps, a new one makes room by closing the oldest still sending its request head. A scrape
//! sends its head as soon as it connects, so only slow and silent connections are ever closed
//! this way: however many strangers keep connecting, a scrape's connection is not the oldest for
//! long enough to be closed.

use std::collections::BTreeMap;

use tokio::sync::oneshot;

/// The connections open, by the order they came (their number).
pub(super) struct Connections {
    keep: usize,
    next: u64,
    open: BTreeMap<u64, Open>,
}

/// One open connection.
struct Open {
    /// Dropping it resolves the connection's [`Closed`]: its task then ends and drops the socket.
    _closer: oneshot::Sender<()>,
    /// Its request head was read: it is being answered, and is not closed to make room.
    answering: bool,
}

/// Resolves when the connection is to be closed to make room for a newer one. Owned by the
/// connection's task; dropping it changes nothing.
pub(super) type Closed = oneshot::Receiver<()>;

impl Connections {
    /// Room for `keep` connections at once.
    pub(super) fn new(keep: usize) -> Connections {
        Connections { keep, next: 0, open: BTreeMap::new() }
    }

    /// Takes a new connection in: its number, and what resolves when it is to be closed. When
    /// `keep` are open, the oldest one still sending its head is closed first; `None` when all of
    /// them are being answered (the new one is then to be closed at once).
    pub(super) fn admit(&mut self) -> Option<(u64, Closed)> {
        if self.open.len() >= self.keep {
            let oldest = self.open.iter().find(|(_, open)| !open.answering).map(|(&number, _)| number)?;
            self.open.remove(&oldest);
        }
        let number = self.next;
        self.next += 1;
        let (closer, closed) = oneshot::channel();
        self.open.insert(number, Open { _closer: closer, answering: false });
        Some((number, closed))
    }

    /// Connection `number` sent its head: it is being answered from now on.
    pub(super) fn answering(&mut self, number: u64) {
        if let Some(open) = self.open.get_mut(&number) {
            open.answering = true;
        }
    }

    /// Connection `number` ended (or was closed to make room, which forgot it already).
    pub(super) fn ended(&mut self, number: u64) {
        self.open.remove(&number);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use tokio::sync::oneshot::error::TryRecvError;

    fn is_closed(closed: &mut Closed) -> bool {
        closed.try_recv() == Err(TryRecvError::Closed)
    }

    #[test]
    fn a_new_connection_closes_the_oldest_still_sending_its_head() {
        let mut connections = Connections::new(3);
        let mut first = connections.admit().unwrap();
        let mut second = connections.admit().unwrap();
        let mut third = connections.admit().unwrap();
        // The first is being answered: the second is the oldest still sending its head.
        connections.answering(first.0);
        let mut fourth = connections.admit().unwrap();
        assert_eq!(connections.open.len(), 3);
        assert!(is_closed(&mut second.1));
        assert!(!is_closed(&mut first.1) && !is_closed(&mut third.1) && !is_closed(&mut fourth.1));
        // The one closed ends later: nothing else changes.
        connections.ended(second.0);
        assert_eq!(connections.open.len(), 3);
        // One that ended leaves room: no one is closed.
        connections.ended(first.0);
        let mut fifth = connections.admit().unwrap();
        assert!(!is_closed(&mut third.1) && !is_closed(&mut fourth.1) && !is_closed(&mut fifth.1));
        // All being answered: the new one is refused, and they go on.
        for number in [third.0, fourth.0, fifth.0] {
            connections.answering(number);
        }
        assert!(connections.admit().is_none());
        assert!(!is_closed(&mut third.1) && !is_closed(&mut fourth.1) && !is_closed(&mut fifth.1));
        assert_eq!(connections.open.len(), 3);
    }

    #[test]
    fn strangers_renewing_more_connections_than_kept_never_close_a_scrape_sending_its_head() {
        let mut connections = Connections::new(8);
        let mut strangers: Vec<_> = (0..8).map(|_| connections.admit().unwrap()).collect();
        for _ in 0..5 {
            // A scrape connects among strangers, more of whom keep coming, and sends its head.
            let mut scrape = connections.admit().unwrap();
            for _ in 0..4 {
                strangers.push(connections.admit().unwrap());
            }
            assert!(!is_closed(&mut scrape.1));
            connections.answering(scrape.0);
            for _ in 0..20 {
                strangers.push(connections.admit().unwrap());
            }
            assert!(!is_closed(&mut scrape.1), "a scrape being answered is never closed to make room");
            connections.ended(scrape.0);
        }
        // The strangers still open are the newest, as many as the room the last scrape left.
        let open: Vec<bool> = strangers.iter_mut().map(|(_, closed)| !is_closed(closed)).collect();
        assert_eq!(open.iter().filter(|&&o| o).count(), 7);
        assert!(open[open.len() - 7..].iter().all(|&o| o));
    }
}
