//! Chains, forks and apply order (spec §7), as `merge.chains.classify` decides them.

use crate::checks::ValidEvent;
use crate::maps::{HashMap, HashSet};
use crate::reasons::Reason;

/// A fork: the chain, the shared `prev_event` and the sorted ids of its events.
pub struct Fork<'a> {
    pub chain: (&'a str, Option<&'a str>),
    pub prev_event: Option<&'a str>,
    pub event_ids: Vec<&'a str>,
}

/// The verdict of §7 on the valid events (indices into the slice given to [`classify`]).
pub struct Classification<'a> {
    /// Each valid event's index by its id (for [`supersessions`] too: the ids are hashed once).
    pub index: HashMap<&'a str, usize>,
    /// Applied events in apply order: (created_at instant, depth, event_id).
    pub applied: Vec<usize>,
    /// Why each valid event that did not apply did not (index → reason).
    pub reasons: Vec<(usize, Reason)>,
    pub forks: Vec<Fork<'a>>,
}

/// What its `prev_event` makes of a valid event (§7): a reason, or `None` when eligible.
///
/// `prev`: the prev when it is valid, else `None`; `prev_admitted`: an event of that id was
/// admitted (valid or not); `prev_applied`: the prev applied; `on_cycle`: following
/// `prev_event` from the child leads back to it. An eligible event applies alone in its (chain,
/// prev) group and is a fork otherwise. A root (no `prev_event`) is always eligible and never
/// asked. The same function as `merge.chains.child_reason`.
pub fn child_reason(
    child: &ValidEvent,
    prev: Option<&ValidEvent>,
    prev_admitted: bool,
    prev_applied: bool,
    on_cycle: bool,
) -> Option<Reason> {
    if on_cycle {
        // §7 Decision (docs/merge-v1.md, Cycles): no root leads to an event on a prev cycle, so
        // it is missing_prev; an event hanging below one has a valid prev that did not apply,
        // and the rule below makes it invalid_prev.
        return Some(Reason::MissingPrev);
    }
    let Some(prev) = prev else {
        // Not valid: it failed §6 (invalid_prev), or no event of that id was admitted.
        return Some(if prev_admitted {
            Reason::InvalidPrev
        } else {
            Reason::MissingPrev
        });
    };
    if !prev_applied {
        Some(Reason::InvalidPrev)
    } else if child.chain() != prev.chain() {
        Some(Reason::PrevWrongChain)
    } else if child.created_us < prev.created_us {
        Some(Reason::CreatedBeforePrev)
    } else {
        None
    }
}

/// Classify `valid` (the events that passed §6) top-down from the roots; `admitted` tells whether
/// an event id was admitted. Terminates on `prev_event` cycles (their events are `missing_prev`).
pub fn classify<'a>(valid: &[&'a ValidEvent], admitted: impl Fn(&str) -> bool) -> Classification<'a> {
    let index: HashMap<&str, usize> = valid
        .iter()
        .enumerate()
        .map(|(at, event)| (event.event_id(), at))
        .collect();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); valid.len()];
    let mut roots: Vec<usize> = Vec::new();
    let mut reason: Vec<Option<Reason>> = vec![None; valid.len()];
    let depth: Vec<Option<u32>> = vec![None; valid.len()];
    let mut not_applied: Vec<usize> = Vec::new();
    for (at, event) in valid.iter().enumerate() {
        match event.prev_event() {
            None => roots.push(at),
            Some(prev) => match index.get(prev) {
                Some(&parent) => children[parent].push(at),
                None => {
                    let (prev_admitted, prev_applied, on_cycle) = (admitted(prev), false, false);
                    reason[at] = child_reason(event, None, prev_admitted, prev_applied, on_cycle);
                    not_applied.push(at);
                }
            },
        }
    }

    let mut walk = Walk {
        valid,
        reason,
        depth,
        not_applied,
        order: Vec::new(),
        queue: Vec::new(),
        forks: Vec::new(),
    };
    let mut root_groups: HashMap<(&str, Option<&str>), Vec<usize>> = HashMap::default();
    for &at in &roots {
        root_groups.entry(valid[at].chain()).or_default().push(at);
    }
    for group in root_groups.values() {
        walk.settle(group, None, 0);
    }
    while let Some((parent, level)) = walk.queue.pop() {
        let mut eligible: Vec<usize> = Vec::new();
        let (prev_admitted, prev_applied, on_cycle) = (true, true, false);
        for &child in &children[parent] {
            match child_reason(valid[child], Some(valid[parent]), prev_admitted, prev_applied, on_cycle) {
                None => eligible.push(child),
                Some(code) => walk.not_apply(child, code),
            }
        }
        if !eligible.is_empty() {
            walk.settle(&eligible, Some(valid[parent].event_id()), level + 1);
        }
    }
    let Walk {
        mut reason,
        depth,
        not_applied,
        mut order,
        forks,
        ..
    } = walk;
    mark_descendants(not_applied, &children, &mut reason);

    // What is left was reached from no root: a prev_event cycle (impossible without a SHA-256
    // collision) and whatever hangs off one; child_reason says what each of them gets.
    let left: Vec<usize> = (0..valid.len())
        .filter(|&at| reason[at].is_none() && depth[at].is_none())
        .collect();
    if !left.is_empty() {
        let members = cycle_members(&left, valid, &index);
        let (prev_admitted, prev_applied, on_cycle) = (true, false, true);
        for &at in &members {
            // A member's prev is the next member.
            let prev = valid[at].prev_event().and_then(|prev| index.get(prev));
            let prev = prev.map(|&prev| valid[prev]);
            reason[at] = child_reason(valid[at], prev, prev_admitted, prev_applied, on_cycle);
        }
        mark_descendants(members, &children, &mut reason);
    }

    order.sort_unstable();
    Classification {
        index,
        applied: order.into_iter().map(|(_, _, _, at)| at).collect(),
        reasons: reason
            .into_iter()
            .enumerate()
            .filter_map(|(at, code)| code.map(|code| (at, code)))
            .collect(),
        forks,
    }
}

/// The state of the top-down walk of [`classify`].
struct Walk<'v, 'a> {
    valid: &'v [&'a ValidEvent],
    reason: Vec<Option<Reason>>,
    depth: Vec<Option<u32>>,
    not_applied: Vec<usize>,
    /// (created_at instant, depth, event_id, index) of every applied event: sorted, the apply order.
    order: Vec<(i64, u32, &'a str, usize)>,
    /// Applied events whose children are still to be seen.
    queue: Vec<(usize, u32)>,
    forks: Vec<Fork<'a>>,
}

impl<'a> Walk<'_, 'a> {
    fn not_apply(&mut self, at: usize, code: Reason) {
        self.reason[at] = Some(code);
        self.not_applied.push(at);
    }

    /// One (chain, prev_event) group of eligible events: alone it applies, else a fork (rule 4).
    fn settle(&mut self, group: &[usize], prev: Option<&'a str>, level: u32) {
        let valid = self.valid;
        if let [only] = *group {
            self.depth[only] = Some(level);
            self.order
                .push((valid[only].created_us, level, valid[only].event_id(), only));
            self.queue.push((only, level));
            return;
        }
        let mut event_ids: Vec<&'a str> = group.iter().map(|&at| valid[at].event_id()).collect();
        event_ids.sort_unstable();
        self.forks.push(Fork {
            chain: valid[group[0]].chain(),
            prev_event: prev,
            event_ids,
        });
        for &at in group {
            self.not_apply(at, Reason::Equivocation);
        }
    }
}

/// Below a valid event that did not apply, every descendant is `invalid_prev` (rule 2).
fn mark_descendants(mut stack: Vec<usize>, children: &[Vec<usize>], reason: &mut [Option<Reason>]) {
    while let Some(parent) = stack.pop() {
        for &child in &children[parent] {
            if reason[child].is_none() {
                reason[child] = Some(Reason::InvalidPrev);
                stack.push(child);
            }
        }
    }
}

/// The events on a `prev_event` cycle among `left`, where every event's prev is in `left` too:
/// following prev pointers from any of them must enter a cycle.
fn cycle_members(left: &[usize], valid: &[&ValidEvent], index: &HashMap<&str, usize>) -> Vec<usize> {
    let mut members: Vec<usize> = Vec::new();
    let mut done: HashSet<usize> = HashSet::default();
    for &start in left {
        let mut path: Vec<usize> = Vec::new();
        let mut on_path: HashMap<usize, usize> = HashMap::default();
        let mut current = Some(start);
        while let Some(at) = current {
            if done.contains(&at) || on_path.contains_key(&at) {
                break;
            }
            on_path.insert(at, path.len());
            path.push(at);
            current = valid[at].prev_event().and_then(|prev| index.get(prev).copied());
        }
        if let Some(at) = current {
            if let Some(&from) = on_path.get(&at) {
                members.extend_from_slice(&path[from..]);
            }
        }
        done.extend(path);
    }
    members
}

/// The supersedes rule of §7: applied event index → indices of the applied events removing it.
pub fn supersessions(classification: &Classification<'_>, valid: &[&ValidEvent]) -> HashMap<usize, Vec<usize>> {
    let mut is_applied = vec![false; valid.len()];
    for &at in &classification.applied {
        is_applied[at] = true;
    }
    let mut removed: HashMap<usize, Vec<usize>> = HashMap::default();
    for &at in &classification.applied {
        let event = valid[at];
        for target_id in event.supersedes() {
            if let Some(&target) = classification.index.get(target_id) {
                if is_applied[target] && target != at && may_supersede(event, valid[target]) {
                    removed.entry(target).or_default().push(at);
                }
            }
        }
    }
    removed
}

/// Same signer (whole object), and the same type or a correction of a non-record (§7).
fn may_supersede(event: &ValidEvent, target: &ValidEvent) -> bool {
    target.signer() == event.signer()
        && (target.event_type() == event.event_type()
            || (event.event_type() == "correction" && target.event_type() != "record_created"))
}
