//! Gap detection over the service's consecutive index, shared by both backends.
//!
//! The seen indexes are kept as runs: disjoint, non-adjacent ranges `lo..=hi` in a table keyed by
//! `lo`. The watermark is the end of the run holding the first index (every index from the first
//! up to it was seen); the runs above it are what lies beyond. Storage and every operation grow
//! with the number of holes, not with the number of deliveries: a million consecutive indexes are
//! one row, and a permanent hole (a lost event never fetched again) costs one row more, not one
//! row for every index after it. The number of distinct seen indexes is the runs' sum, read when
//! asked (one row a hole: `admin::seen_count`), so the count of missing indexes is arithmetic over
//! the runs, never a scan of the deliveries.

/// Seen indexes `lo..=hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    pub lo: i64,
    pub hi: i64,
}

/// The runs table of a backend, inside the transaction that changes it.
pub(crate) trait Runs {
    type Error;
    /// The run with the greatest `lo <= at`.
    fn at_or_before(&mut self, at: i64) -> Result<Option<Run>, Self::Error>;
    /// The runs whose `lo` is in `from..=to`, in order.
    fn starting_within(&mut self, from: i64, to: i64) -> Result<Vec<Run>, Self::Error>;
    /// Removes the run starting at `lo`.
    fn remove(&mut self, lo: i64) -> Result<(), Self::Error>;
    /// Inserts the run, or sets the `hi` of the run starting at `run.lo`, with its times: when
    /// its earliest index was seen (the earliest of the runs starting within it and `seen`'s,
    /// never later than `seen.first_ms`) and when an index was last added (the latest of theirs
    /// and `seen.last_ms`).
    fn put(&mut self, run: Run, seen: Seen) -> Result<(), Self::Error>;
    /// At most `limit` runs whose `lo` is above `after`, in order.
    fn after(&mut self, after: i64, limit: usize) -> Result<Vec<Run>, Self::Error>;
    /// The first and the last run.
    fn lowest(&mut self) -> Result<Option<Run>, Self::Error>;
    fn highest(&mut self) -> Result<Option<Run>, Self::Error>;
    /// How many indexes the runs hold below `first`.
    fn seen_below(&mut self, first: i64) -> Result<i64, Self::Error>;
}

/// The facts of the gaps, given the configured first index, the count of distinct seen indexes
/// and the index jumps of the current numbering (see [`jump_holes`]).
pub(crate) fn facts<R: Runs>(
    runs: &mut R,
    configured_first: Option<i64>,
    seen: i64,
    jumps: &[Jump],
) -> Result<Facts, R::Error> {
    let lowest = runs.lowest()?.map(|run| run.lo);
    let highest = runs.highest()?.map(|run| run.hi);
    let seen_below_first = match configured_first {
        Some(first) => runs.seen_below(first)?,
        None => 0,
    };
    let run_at_first = match configured_first.or(lowest) {
        Some(first) => runs.at_or_before(first)?,
        None => None,
    };
    let jumped = match configured_first.or(lowest) {
        Some(first) => jump_holes(runs, first, jumps)?.iter().map(|&(lo, hi)| span(lo, hi)).sum(),
        None => 0,
    };
    Ok(Facts { configured_first, lowest, highest, seen, seen_below_first, run_at_first, jumped })
}

/// An index jump: the index that landed more than the window beyond `previous_highest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Jump {
    pub index: i64,
    pub previous_highest: i64,
}

/// The stretches index jumps leave out of the gaps: for each jump, the indexes above the highest
/// seen inside its stretch `previous_highest + 1 ..= index - 1` (the whole stretch while none
/// was), up to `index - 1`. Indexes that arrive inside the stretch later (traffic going on below
/// a stray index) shrink it from below, and holes among them are missing as usual; once traffic
/// reaches the jump's index, nothing is left out at all. In order, without repeats.
pub(crate) fn jump_holes<R: Runs>(runs: &mut R, first: i64, jumps: &[Jump]) -> Result<Vec<(i64, i64)>, R::Error> {
    let mut holes = Vec::new();
    for jump in jumps {
        let Some(top_of_stretch) = jump.index.checked_sub(1) else { continue };
        let seen_in_stretch = runs
            .at_or_before(top_of_stretch)?
            .map(|run| run.hi.min(top_of_stretch))
            .filter(|&hi| hi > jump.previous_highest);
        let lo = seen_in_stretch.unwrap_or(jump.previous_highest).saturating_add(1).max(first);
        if lo <= top_of_stretch {
            holes.push((lo, top_of_stretch));
        }
    }
    holes.sort_unstable();
    holes.dedup();
    Ok(holes)
}

/// Whether `index`, about to be recorded, jumps more than `window` beyond the highest index
/// seen (or the configured first index): the highest it jumps from, if so.
pub(crate) fn jump_of<R: Runs>(
    runs: &mut R,
    index: i64,
    configured_first: impl FnOnce() -> Result<Option<i64>, R::Error>,
    window: i64,
) -> Result<Option<i64>, R::Error> {
    // The usual index lands within the window of the run at or before it, and the highest index
    // (or the configured first one less one) is no lower than that run's end: no jump, and
    // nothing more to read on a delivery's path.
    if let Some(run) = runs.at_or_before(index)? {
        if i128::from(index) - i128::from(run.hi) <= i128::from(window) {
            return Ok(None);
        }
    }
    let configured_first = configured_first()?;
    let Some(base) = jump_base(runs.highest()?.map(|run| run.hi), configured_first) else {
        return Ok(None);
    };
    Ok(beyond(index, base, window).then_some(base))
}

/// What an index is judged against for a jump: the highest index seen, or the configured first
/// one less one when that is higher; none when neither is known.
fn jump_base(highest: Option<i64>, configured_first: Option<i64>) -> Option<i64> {
    match (highest, configured_first) {
        (Some(highest), Some(first)) => Some(highest.max(first.saturating_sub(1))),
        (Some(highest), None) => Some(highest),
        (None, first) => first.map(|first| first.saturating_sub(1)),
    }
}

/// Whether `index` lands more than `window` beyond `base` (without overflow).
fn beyond(index: i64, base: i64, window: i64) -> bool {
    i128::from(index) - i128::from(base) > i128::from(window)
}

/// How many indexes `lo..=hi` holds (`lo <= hi`), without overflow at the ends of the range.
pub(crate) fn span(lo: i64, hi: i64) -> u64 {
    u64::try_from(i128::from(hi) - i128::from(lo) + 1).unwrap_or(0)
}

/// At most `limit` missing ranges from `first`, leaving out the holes of index jumps.
pub(crate) fn missing<R: Runs>(
    runs: &mut R,
    first: i64,
    jumps: &[Jump],
    limit: usize,
) -> Result<Vec<(i64, i64)>, R::Error> {
    let holes = jump_holes(runs, first, jumps)?;
    let at_first = runs.at_or_before(first)?;
    let after = runs.after(first, limit.saturating_add(holes.len()))?;
    let mut ranges = missing_ranges(first, at_first, &after, limit.saturating_add(holes.len()));
    ranges.retain(|range| !holes.contains(range));
    ranges.truncate(limit);
    Ok(ranges)
}

/// When indexes added to the runs were seen, in ms on the journal's wall clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    /// When the earliest of them was seen (now, for one delivery).
    pub first_ms: i64,
    /// When the latest was; `None` when they were not delivered (closed by hand).
    pub last_ms: Option<i64>,
}

impl Seen {
    /// Delivered at `at_ms`.
    pub fn at(at_ms: i64) -> Seen {
        Seen { first_ms: at_ms, last_ms: Some(at_ms) }
    }
}

/// Records the indexes `a..=b` (`a <= b`) as seen, merging them with the runs they touch.
/// Returns how many of them were not seen before (at most `i64::MAX`).
pub(crate) fn add<R: Runs>(runs: &mut R, a: i64, b: i64, seen: Seen) -> Result<i64, R::Error> {
    debug_assert!(a <= b);
    let mut merged = Run { lo: a, hi: b };
    let mut covered = 0;
    let mut absorbed = Vec::new();
    let left = runs.at_or_before(a)?.filter(|left| left.hi >= a.saturating_sub(1));
    if let Some(left) = left {
        merged = Run { lo: left.lo, hi: merged.hi.max(left.hi) };
        covered += overlap(left, a, b);
        absorbed.push(left);
    }
    for run in runs.starting_within(a, b.saturating_add(1))? {
        if absorbed.first().is_some_and(|left| left.lo == run.lo) {
            continue;
        }
        merged.hi = merged.hi.max(run.hi);
        covered += overlap(run, a, b);
        absorbed.push(run);
    }
    if absorbed.len() == 1 && absorbed[0] == merged {
        return Ok(0);
    }
    // Put first, so that the merged run takes the earliest time of the runs it absorbs.
    runs.put(merged, seen)?;
    for run in &absorbed {
        if run.lo != merged.lo {
            runs.remove(run.lo)?;
        }
    }
    let new = i128::from(b) - i128::from(a) + 1 - covered;
    Ok(i64::try_from(new).unwrap_or(i64::MAX))
}

/// How many of `a..=b` the run holds.
fn overlap(run: Run, a: i64, b: i64) -> i128 {
    (i128::from(run.hi.min(b)) - i128::from(run.lo.max(a)) + 1).max(0)
}

/// Adds indexes recorded together later (a fold, a merge) as if each had been added as it
/// arrived, in `arrived`'s order: each judged for an index jump (see `jump_of`) against every
/// index seen before it, whenever the batch is added. An index can be a jump only when it lands
/// more than `window` beyond the highest seen so far (or the configured first one less one), which
/// is rare: the indexes before such a one are added first, so that it is judged exactly; the
/// others are added in sorted runs, a few statements a batch. `arrived`: `(index, arrived_ms,
/// what came with it)`; answers the jumps found: `(index, previous_highest, what came with it)`.
pub(crate) fn add_arrived<R: Runs, T: Copy>(
    runs: &mut R,
    arrived: &[(i64, i64, T)],
    configured_first: Option<i64>,
    window: i64,
) -> Result<Vec<(i64, i64, T)>, R::Error> {
    let mut jumps = Vec::new();
    let mut pending: Vec<(i64, i64)> = Vec::with_capacity(arrived.len());
    let mut highest = runs.highest()?.map(|run| run.hi);
    for &(index, at, with) in arrived {
        if jump_base(highest, configured_first).is_some_and(|base| beyond(index, base, window)) {
            add_sorted(runs, &mut pending)?;
            if let Some(previous) = jump_of(runs, index, || Ok(configured_first), window)? {
                jumps.push((index, previous, with));
            }
        }
        pending.push((index, at));
        highest = Some(highest.map_or(index, |highest| highest.max(index)));
    }
    add_sorted(runs, &mut pending)?;
    Ok(jumps)
}

/// Adds `pending` (`(index, arrived_ms)`, in any order, repeats allowed) as runs of following
/// indexes, each dated by its earliest and latest arrival, and empties it.
fn add_sorted<R: Runs>(runs: &mut R, pending: &mut Vec<(i64, i64)>) -> Result<(), R::Error> {
    pending.sort_unstable();
    let mut at = 0;
    while at < pending.len() {
        let (lo, first) = pending[at];
        let (mut hi, mut seen) = (lo, Seen { first_ms: first, last_ms: Some(first) });
        at += 1;
        while let Some(&(index, when)) = pending.get(at) {
            if index != hi && hi.checked_add(1) != Some(index) {
                break;
            }
            hi = index;
            seen.first_ms = seen.first_ms.min(when);
            seen.last_ms = seen.last_ms.max(Some(when));
            at += 1;
        }
        add(runs, lo, hi, seen)?;
    }
    pending.clear();
    Ok(())
}

/// What a backend reads to describe the gaps; see [`Facts::summary`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Facts {
    /// The configured first index, if any.
    pub configured_first: Option<i64>,
    /// The lowest and highest index ever seen.
    pub lowest: Option<i64>,
    pub highest: Option<i64>,
    /// Distinct indexes seen.
    pub seen: i64,
    /// Distinct indexes seen below the configured first index.
    pub seen_below_first: i64,
    /// The run at or before the first index.
    pub run_at_first: Option<Run>,
    /// Indexes in the holes of index jumps (not missing).
    pub jumped: u64,
}

/// The gap figures of `Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Summary {
    pub first: Option<i64>,
    pub highest: Option<i64>,
    pub watermark: Option<i64>,
    pub missing: u64,
}

impl Facts {
    /// The index counting starts from: the configured one, else the lowest seen.
    pub fn first(&self) -> Option<i64> {
        self.configured_first.or(self.lowest)
    }

    pub fn summary(&self) -> Summary {
        let first = self.first();
        let watermark = match (first, self.run_at_first) {
            (Some(first), Some(run)) if run.lo <= first && run.hi >= first => Some(run.hi),
            _ => None,
        };
        let missing = match (first, self.highest) {
            // Every index up to the highest was seen (also when the count saturated).
            _ if watermark.is_some() && watermark == self.highest => 0,
            (Some(first), Some(highest)) if highest >= first => {
                let seen = i128::from(self.seen) - i128::from(self.seen_below_first);
                i128::from(span(first, highest)) - seen - i128::from(self.jumped)
            }
            _ => 0,
        };
        let missing = u64::try_from(missing.max(0)).unwrap_or(u64::MAX);
        Summary { first, highest: self.highest, watermark, missing }
    }
}

/// The missing ranges from `first`, given the run at or before `first` and the runs after it in
/// order (runs are never adjacent, so each of those opens a gap); at most `limit` ranges.
pub(crate) fn missing_ranges(first: i64, at_first: Option<Run>, after: &[Run], limit: usize) -> Vec<(i64, i64)> {
    let mut next = match at_first {
        Some(run) if run.hi >= first => run.hi.saturating_add(1),
        _ => first,
    };
    let mut out = Vec::new();
    for run in after {
        if out.len() >= limit {
            break;
        }
        if run.lo > next {
            out.push((next, run.lo - 1));
        }
        next = next.max(run.hi.saturating_add(1));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::convert::Infallible;

    #[derive(Default)]
    struct Memory(BTreeMap<i64, i64>);

    impl Runs for Memory {
        type Error = Infallible;
        fn at_or_before(&mut self, at: i64) -> Result<Option<Run>, Infallible> {
            Ok(self.0.range(..=at).next_back().map(|(&lo, &hi)| Run { lo, hi }))
        }
        fn starting_within(&mut self, from: i64, to: i64) -> Result<Vec<Run>, Infallible> {
            Ok(self.0.range(from..=to).map(|(&lo, &hi)| Run { lo, hi }).collect())
        }
        fn remove(&mut self, lo: i64) -> Result<(), Infallible> {
            self.0.remove(&lo);
            Ok(())
        }
        fn put(&mut self, run: Run, _seen: Seen) -> Result<(), Infallible> {
            self.0.insert(run.lo, run.hi);
            Ok(())
        }
        fn after(&mut self, after: i64, limit: usize) -> Result<Vec<Run>, Infallible> {
            Ok(self.0.range(after + 1..).take(limit).map(|(&lo, &hi)| Run { lo, hi }).collect())
        }
        fn lowest(&mut self) -> Result<Option<Run>, Infallible> {
            Ok(self.0.iter().next().map(|(&lo, &hi)| Run { lo, hi }))
        }
        fn highest(&mut self) -> Result<Option<Run>, Infallible> {
            Ok(self.0.iter().next_back().map(|(&lo, &hi)| Run { lo, hi }))
        }
        fn seen_below(&mut self, first: i64) -> Result<i64, Infallible> {
            Ok(self.0.range(..first).map(|(&lo, &hi)| overlap(Run { lo, hi }, lo, first - 1) as i64).sum())
        }
    }

    impl Memory {
        fn runs(&self) -> Vec<(i64, i64)> {
            self.0.iter().map(|(&lo, &hi)| (lo, hi)).collect()
        }
        fn facts(&mut self, configured_first: Option<i64>, seen: i64) -> Facts {
            facts(self, configured_first, seen, &[]).unwrap()
        }
        fn missing(&mut self, first: i64, limit: usize) -> Vec<(i64, i64)> {
            missing(self, first, &[], limit).unwrap()
        }
    }

    #[test]
    fn single_indexes_merge_into_runs() {
        let mut m = Memory::default();
        let mut seen = 0;
        for i in [5, 7, 6, 6, 10, 1, 2, 3, 12, 11] {
            seen += add(&mut m, i, i, Seen::at(0)).unwrap();
        }
        assert_eq!(m.runs(), vec![(1, 3), (5, 7), (10, 12)]);
        assert_eq!(seen, 9);
        assert_eq!(m.missing(1, 10), vec![(4, 4), (8, 9)]);
        assert_eq!(m.missing(1, 1), vec![(4, 4)]);
        let summary = m.facts(None, seen).summary();
        assert_eq!(summary, Summary { first: Some(1), highest: Some(12), watermark: Some(3), missing: 3 });
        seen += add(&mut m, 4, 4, Seen::at(0)).unwrap();
        assert_eq!(m.facts(None, seen).summary().watermark, Some(7));
    }

    #[test]
    fn ranges_merge_across_several_runs() {
        let mut m = Memory::default();
        for (a, b) in [(1, 2), (5, 6), (9, 9), (20, 30)] {
            add(&mut m, a, b, Seen::at(0)).unwrap();
        }
        assert_eq!(add(&mut m, 2, 10, Seen::at(0)).unwrap(), 5); // 3, 4, 7, 8, 10
        assert_eq!(m.runs(), vec![(1, 10), (20, 30)]);
        assert_eq!(add(&mut m, 3, 8, Seen::at(0)).unwrap(), 0);
        assert_eq!(add(&mut m, 0, 40, Seen::at(0)).unwrap(), 1 + 9 + 10);
        assert_eq!(m.runs(), vec![(0, 40)]);
        assert_eq!(add(&mut m, i64::MAX, i64::MAX, Seen::at(0)).unwrap(), 1);
        assert_eq!(add(&mut m, i64::MAX - 1, i64::MAX, Seen::at(0)).unwrap(), 1);
        assert_eq!(m.runs(), vec![(0, 40), (i64::MAX - 1, i64::MAX)]);
    }

    #[test]
    fn configured_first_index_counts_from_there() {
        let mut m = Memory::default();
        let mut seen = 0;
        for i in [3, 4, 8] {
            seen += add(&mut m, i, i, Seen::at(0)).unwrap();
        }
        let summary = m.facts(Some(1), seen).summary();
        assert_eq!(summary, Summary { first: Some(1), highest: Some(8), watermark: None, missing: 5 });
        assert_eq!(m.missing(1, 10), vec![(1, 2), (5, 7)]);
        let summary = m.facts(Some(4), seen).summary();
        assert_eq!(summary, Summary { first: Some(4), highest: Some(8), watermark: Some(4), missing: 3 });
        assert_eq!(m.missing(4, 10), vec![(5, 7)]);
        assert_eq!(Facts::default().summary(), Summary { first: None, highest: None, watermark: None, missing: 0 });
    }

    #[test]
    fn an_index_jump_leaves_no_gap_and_holes_below_it_still_count() {
        let mut m = Memory::default();
        let mut seen = 0;
        for i in 1..=5 {
            seen += add(&mut m, i, i, Seen::at(0)).unwrap();
        }
        let far = 1_000_000_000_000;
        assert_eq!(jump_of(&mut m, far, || Ok(None), 100_000).unwrap(), Some(5));
        assert_eq!(jump_of(&mut m, 100_005, || Ok(None), 100_000).unwrap(), None);
        seen += add(&mut m, far, far, Seen::at(0)).unwrap();
        // A lost event right above the jump is missing; the stretch below the jump is not.
        seen += add(&mut m, far + 2, far + 2, Seen::at(0)).unwrap();
        let jumps = [Jump { index: far, previous_highest: 5 }];
        let summary = facts(&mut m, None, seen, &jumps).unwrap().summary();
        assert_eq!(summary.missing, 1);
        assert_eq!(missing(&mut m, 1, &jumps, 10).unwrap(), vec![(far + 1, far + 1)]);
        // Traffic that goes on below the jump: its holes are missing, the rest is not.
        for i in [6, 7, 9] {
            seen += add(&mut m, i, i, Seen::at(0)).unwrap();
        }
        let summary = facts(&mut m, None, seen, &jumps).unwrap().summary();
        assert_eq!(summary.missing, 2);
        assert_eq!(missing(&mut m, 1, &jumps, 10).unwrap(), vec![(8, 8), (far + 1, far + 1)]);
        assert_eq!(missing(&mut m, 1, &jumps, 1).unwrap(), vec![(8, 8)]);
        // Without the jump recorded the same runs make a gap of its size.
        let summary = facts(&mut m, None, seen, &[]).unwrap().summary();
        assert_eq!(summary.missing, (far - 8) as u64);
    }

    #[test]
    fn traffic_that_reaches_a_jump_shows_every_hole_below_it() {
        let mut m = Memory::default();
        let mut seen = 0;
        for i in (1..=5).chain([100]).chain(6..=99).filter(|&i| i != 50) {
            seen += add(&mut m, i, i, Seen::at(0)).unwrap();
        }
        let jumps = [Jump { index: 100, previous_highest: 5 }];
        assert_eq!(facts(&mut m, None, seen, &jumps).unwrap().summary().missing, 1);
        assert_eq!(missing(&mut m, 1, &jumps, 10).unwrap(), vec![(50, 50)]);
    }

    #[test]
    fn counts_do_not_overflow_at_the_ends_of_the_index_range() {
        let mut m = Memory::default();
        let mut seen = 0;
        seen += add(&mut m, 0, 0, Seen::at(0)).unwrap();
        seen += add(&mut m, i64::MAX, i64::MAX, Seen::at(0)).unwrap();
        let summary = m.facts(None, seen).summary();
        assert_eq!(summary.missing, (i64::MAX - 1) as u64);
        assert_eq!(m.missing(0, 5), vec![(1, i64::MAX - 1)]);
        assert_eq!(add(&mut m, 1, i64::MAX - 1, Seen::at(0)).unwrap(), i64::MAX - 1);
        assert_eq!(m.runs(), vec![(0, i64::MAX)]);
        // The count of seen indexes saturates at i64::MAX, one short of the 2^63 indexes.
        assert_eq!(m.facts(None, i64::MAX).summary().missing, 0);
        assert_eq!(span(0, i64::MAX), 1 << 63);
        assert_eq!(jump_of(&mut m, i64::MAX, || Ok(Some(0)), 10).unwrap(), None);
    }

    /// A batch added later gives the runs and the jumps that adding each index as it arrived
    /// gives, over generated arrivals (ascending with holes, far jumps, repeats, indexes going
    /// back, the ends of the range), with and without a configured first index.
    #[test]
    fn a_batch_added_later_is_judged_as_it_arrived() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |bound: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % bound
        };
        for case in 0..3000 {
            let window = [1, 5, 100][case % 3];
            let configured_first = [None, Some(1), Some(50)][(case / 3) % 3];
            let mut already = Memory::default();
            for index in 0..next(4) as i64 {
                add(&mut already, index * 3 + 1, index * 3 + 2, Seen::at(0)).unwrap();
            }
            let mut arrived = Vec::new();
            let mut last = next(20) as i64;
            for at in 0..next(40) as i64 {
                last = match next(10) {
                    0 => last.saturating_add(50 + next(300) as i64),
                    1 => last.saturating_sub(next(30) as i64),
                    2 => last,
                    3 => i64::MAX - next(3) as i64,
                    _ => last.saturating_add(1 + next(2) as i64),
                };
                arrived.push((last, at, at));
            }
            let mut one_by_one = Memory(already.0.clone());
            let mut expected = Vec::new();
            for &(index, at, with) in &arrived {
                if let Some(previous) = jump_of(&mut one_by_one, index, || Ok(configured_first), window).unwrap() {
                    expected.push((index, previous, with));
                }
                add(&mut one_by_one, index, index, Seen::at(at)).unwrap();
            }
            let mut batch = Memory(already.0.clone());
            let jumps = add_arrived(&mut batch, &arrived, configured_first, window).unwrap();
            assert_eq!(batch.0, one_by_one.0, "runs, case {case}: {arrived:?}");
            assert_eq!(jumps, expected, "jumps, case {case}: {arrived:?}");
        }
    }
}
