//! Chains, forks and apply order (spec §7), as `merge.chains.classify` decides them.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::checks::ValidEvent;
use crate::maps::{HashMap, HashSet};
use crate::pool::{map_with_capacity, vec_with_capacity};
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
    reason_under(
        (child.chain(), child.created_us),
        prev.map(|prev| (prev.chain(), prev.created_us)),
        prev_admitted,
        prev_applied,
        on_cycle,
    )
}

/// [`child_reason`] on what it reads of the child and of its prev, if valid: the chain (any
/// value that compares as chains do) and the `created_at` instant.
fn reason_under<C: PartialEq>(
    child: (C, i64),
    prev: Option<(C, i64)>,
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
    } else if child.0 != prev.0 {
        Some(Reason::PrevWrongChain)
    } else if child.1 < prev.1 {
        Some(Reason::CreatedBeforePrev)
    } else {
        None
    }
}

/// What §7 reads of a valid event, gathered in one pass over the events: the walk below then
/// reads this table, in order, and never the events themselves, each a block of its own
/// whose strings lie after its payload (a cache miss or two each time an event is read).
struct Facts<'a> {
    event_id: &'a str,
    /// The node of its `prev_event` when that is a valid event (set once every id is indexed).
    prev: Option<usize>,
    /// Its chain, numbered: equal chains, equal numbers.
    chain: u32,
    created_us: i64,
}

/// Each event's children (the valid events naming it as their `prev_event`), in index order: one
/// list of them all, each event's a run of it, not a vector each.
struct Children {
    /// Where each event's run starts in `all`; the last entry, where the last run ends.
    starts: Vec<usize>,
    all: Vec<usize>,
}

impl Children {
    fn new(facts: &[Facts<'_>]) -> Children {
        let mut starts = vec![0; facts.len() + 1];
        for prev in facts.iter().filter_map(|facts| facts.prev) {
            starts[prev + 1] += 1;
        }
        for at in 1..starts.len() {
            starts[at] += starts[at - 1];
        }
        let mut next = starts.clone();
        let mut all = vec![0; starts[facts.len()]];
        for (at, prev) in facts
            .iter()
            .enumerate()
            .filter_map(|(at, facts)| Some((at, facts.prev?)))
        {
            all[next[prev]] = at;
            next[prev] += 1;
        }
        Children { starts, all }
    }

    /// The children of the event at `parent`.
    fn of(&self, parent: usize) -> &[usize] {
        &self.all[self.starts[parent]..self.starts[parent + 1]]
    }
}

/// Classify `valid` (the events that passed §6) top-down from the roots; `admitted` tells whether
/// an event id was admitted. Terminates on `prev_event` cycles (their events are `missing_prev`).
pub fn classify<'a>(valid: &[&'a ValidEvent], admitted: impl Fn(&str) -> bool) -> Classification<'a> {
    let mut index: HashMap<&str, usize> = map_with_capacity(valid.len());
    let mut chains: HashMap<(&str, Option<&str>), u32> = HashMap::default();
    let mut facts: Vec<Facts<'a>> = vec_with_capacity(valid.len());
    let mut prevs: Vec<Option<&str>> = vec_with_capacity(valid.len());
    for (at, event) in valid.iter().enumerate() {
        let event_id = event.event_id();
        prevs.push(event.prev_event());
        index.insert(event_id, at);
        let numbered = chains.len() as u32;
        let chain = *chains.entry(event.chain()).or_insert(numbered);
        facts.push(Facts {
            event_id,
            prev: None,
            chain,
            created_us: event.created_us,
        });
    }
    let mut roots: Vec<usize> = Vec::new();
    let mut reason: Vec<Option<Reason>> = vec![None; valid.len()];
    let depth: Vec<Option<u32>> = vec![None; valid.len()];
    let mut not_applied: Vec<usize> = Vec::new();
    for (at, prev) in prevs.into_iter().enumerate() {
        match prev {
            None => roots.push(at),
            Some(prev) => match index.get(prev) {
                Some(&parent) => facts[at].prev = Some(parent),
                None => {
                    let (prev_admitted, prev_applied, on_cycle) = (admitted(prev), false, false);
                    reason[at] = child_reason(valid[at], None, prev_admitted, prev_applied, on_cycle);
                    not_applied.push(at);
                }
            },
        }
    }
    let children = Children::new(&facts);

    let mut walk = Walk {
        valid,
        facts: &facts,
        reason,
        depth,
        not_applied,
        order: Vec::new(),
        queue: Vec::new(),
        forks: Vec::new(),
    };
    let mut root_groups: HashMap<u32, Vec<usize>> = HashMap::default();
    for &at in &roots {
        root_groups.entry(facts[at].chain).or_default().push(at);
    }
    for group in root_groups.values() {
        walk.settle(group, None, 0);
    }
    while let Some((parent, level)) = walk.queue.pop() {
        let mut eligible: Vec<usize> = Vec::new();
        let (prev_admitted, prev_applied, on_cycle) = (true, true, false);
        let under = (facts[parent].chain, facts[parent].created_us);
        for &child in children.of(parent) {
            let child_facts = (facts[child].chain, facts[child].created_us);
            match reason_under(child_facts, Some(under), prev_admitted, prev_applied, on_cycle) {
                None => eligible.push(child),
                Some(code) => walk.not_apply(child, code),
            }
        }
        if !eligible.is_empty() {
            walk.settle(&eligible, Some(facts[parent].event_id), level + 1);
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
        let members = cycle_members(&left, &facts);
        let (prev_admitted, prev_applied, on_cycle) = (true, false, true);
        for &at in &members {
            // A member's prev is the next member.
            let prev = facts[at].prev.map(|prev| valid[prev]);
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
    facts: &'v [Facts<'a>],
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
        let facts = self.facts;
        if let [only] = *group {
            self.depth[only] = Some(level);
            self.order
                .push((facts[only].created_us, level, facts[only].event_id, only));
            self.queue.push((only, level));
            return;
        }
        let mut event_ids: Vec<&'a str> = group.iter().map(|&at| facts[at].event_id).collect();
        event_ids.sort_unstable();
        self.forks.push(Fork {
            chain: self.valid[group[0]].chain(),
            prev_event: prev,
            event_ids,
        });
        for &at in group {
            self.not_apply(at, Reason::Equivocation);
        }
    }
}

/// Below a valid event that did not apply, every descendant is `invalid_prev` (rule 2).
fn mark_descendants(mut stack: Vec<usize>, children: &Children, reason: &mut [Option<Reason>]) {
    while let Some(parent) = stack.pop() {
        for &child in children.of(parent) {
            if reason[child].is_none() {
                reason[child] = Some(Reason::InvalidPrev);
                stack.push(child);
            }
        }
    }
}

/// The events on a `prev_event` cycle among `left`, where every event's prev is in `left` too:
/// following prev pointers from any of them must enter a cycle.
fn cycle_members(left: &[usize], facts: &[Facts<'_>]) -> Vec<usize> {
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
            current = facts[at].prev;
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

/// A valid event as [`ChainIndex`] sees it: its id, its `prev_event`, its chain (interned by
/// the caller: equal chains, equal numbers) and its `created_at` instant.
pub struct Node {
    pub id: Arc<str>,
    pub prev: Option<Arc<str>>,
    pub chain: u32,
    pub created_us: i64,
}

/// A (prev, chain) group of eligible events: the prev's node (`None` for roots) and the chain.
type Group = (Option<usize>, u32);

/// Spec §7 kept up to date as events arrive: the twin of `merge.chains.ChainIndex` (the
/// incremental engine's), rule for rule; always equal to [`classify`]. Nodes are numbered in
/// the order added. Each call re-decides only what the new fact can change and returns the
/// nodes whose status changed; a change propagates only downwards, while the applied set
/// changes (see the Python twin's note). Cycles of `prev_event` are found with a disjoint-set
/// forest of the weakly connected components of the prev graph.
#[derive(Default)]
pub struct ChainIndex {
    pub nodes: Vec<Node>,
    by_id: HashMap<Arc<str>, usize>,
    /// Every admitted event id, valid or not.
    admitted: HashSet<Arc<str>>,
    /// Depth in its chain of each applied node (root 0).
    pub depth: Vec<Option<u32>>,
    /// Why each valid node that did not apply did not.
    pub reason: Vec<Option<Reason>>,
    /// Set when a reason changed: the caller writes `invalid_events` again, and clears it.
    pub reasons_changed: bool,
    /// prev_event → the nodes naming it (whatever the prev is, even unknown).
    children: HashMap<Arc<str>, Vec<usize>>,
    /// Each group's eligible nodes, in arrival order; the groups that are forks.
    groups: HashMap<Group, Vec<usize>>,
    forked: HashSet<Group>,
    /// (created_at instant, depth, event_id, node) of each applied node: the apply order.
    pub order: BTreeSet<(i64, u32, Arc<str>, usize)>,
    on_cycle: HashSet<usize>,
    parent: Vec<usize>,
    size: Vec<usize>,
    dirty: Vec<usize>,
}

impl ChainIndex {
    /// The node of a valid event, if it is one.
    pub fn node(&self, event_id: &str) -> Option<usize> {
        self.by_id.get(event_id).copied()
    }

    /// Record an admitted event that failed §6: its children go from missing to invalid prev.
    pub fn add_invalid(&mut self, event_id: &Arc<str>) -> Vec<usize> {
        let mut changed = Vec::new();
        if self.admitted.insert(event_id.clone()) {
            self.settle_children(event_id, &mut changed);
        }
        changed
    }

    /// Add a valid event (new, or admitted before as invalid); every node whose status changed.
    pub fn add(&mut self, node: Node) -> Vec<usize> {
        let mut changed = Vec::new();
        if self.by_id.contains_key(&node.id) {
            return changed;
        }
        let at = self.nodes.len();
        let (id, prev) = (node.id.clone(), node.prev.clone());
        let chain = node.chain;
        self.nodes.push(node);
        self.depth.push(None);
        self.reason.push(None);
        self.parent.push(at);
        self.size.push(1);
        self.by_id.insert(id.clone(), at);
        self.admitted.insert(id.clone());
        let waiting = self.children.get(&id).cloned().unwrap_or_default();
        for child in waiting {
            self.union(child, at);
        }
        match prev {
            None => self.join((None, chain), at, 0, &mut changed),
            Some(prev) => {
                self.children.entry(prev.clone()).or_default().push(at);
                let prev_node = self.node(&prev);
                match prev_node {
                    Some(prev_at) if self.find(prev_at) == self.find(at) => self.close_cycle(at, &mut changed),
                    _ => {
                        if let Some(prev_at) = prev_node {
                            self.union(at, prev_at);
                        }
                        self.attach(at, &mut changed);
                    }
                }
            }
        }
        // Propagate downwards while the applied set changes (and always below a new event).
        while let Some(parent) = self.dirty.pop() {
            let parent_id = self.nodes[parent].id.clone();
            self.settle_children(&parent_id, &mut changed);
        }
        changed
    }

    /// The forks: each one's chain, shared prev (its node) and sorted event ids.
    pub fn forks(&self) -> impl Iterator<Item = (u32, Option<usize>, Vec<&str>)> {
        self.forked.iter().map(|group| {
            let mut ids: Vec<&str> = self.groups[group].iter().map(|&at| &*self.nodes[at].id).collect();
            ids.sort_unstable();
            (group.1, group.0, ids)
        })
    }

    /// Decide a node under its prev (it has one), as that prev stands now (§7).
    fn attach(&mut self, at: usize, changed: &mut Vec<usize>) {
        let node = &self.nodes[at];
        let chain = node.chain;
        let prev = node.prev.as_deref().expect("attach: a node with a prev");
        let prev_at = self.node(prev);
        let depth = prev_at.and_then(|prev_at| self.depth[prev_at]);
        let reason = reason_under(
            (node.chain, node.created_us),
            prev_at.map(|prev_at| (self.nodes[prev_at].chain, self.nodes[prev_at].created_us)),
            self.admitted.contains(prev),
            depth.is_some(),
            self.on_cycle.contains(&at),
        );
        match (reason, depth) {
            (None, Some(depth)) => self.join((prev_at, chain), at, depth + 1, changed),
            (Some(reason), _) => self.set(at, Status::Reason(reason), changed),
            (None, None) => unreachable!("eligible only under an applied prev"),
        }
    }

    /// An eligible node joins its (prev, chain) group: alone it applies, else a fork (§7.4).
    fn join(&mut self, group: Group, at: usize, depth: u32, changed: &mut Vec<usize>) {
        let members = self.groups.entry(group).or_default();
        members.push(at);
        match members.len() {
            1 => self.set(at, Status::Depth(depth), changed),
            count => {
                let first = members[0];
                if count == 2 {
                    // The late second successor: the first one stops applying.
                    self.forked.insert(group);
                    self.set(first, Status::Reason(Reason::Equivocation), changed);
                }
                self.set(at, Status::Reason(Reason::Equivocation), changed);
            }
        }
    }

    /// Re-decide every node naming `parent_id` after the parent's status changed.
    fn settle_children(&mut self, parent_id: &str, changed: &mut Vec<usize>) {
        let Some(children) = self.children.get(parent_id).filter(|kids| !kids.is_empty()).cloned() else {
            return;
        };
        if let Some(parent) = self.node(parent_id) {
            // Its children's fork group is decided afresh.
            let group = (Some(parent), self.nodes[parent].chain);
            self.groups.remove(&group);
            self.forked.remove(&group);
        }
        for child in children {
            self.attach(child, changed);
        }
    }

    /// Node `at` closes a prev cycle (its prev descends from it): the members are re-decided.
    fn close_cycle(&mut self, at: usize, changed: &mut Vec<usize>) {
        let mut path: Vec<usize> = Vec::new();
        let mut current = Some(at);
        while let Some(member) = current.filter(|member| !path.contains(member)) {
            path.push(member);
            current = self.nodes[member].prev.as_deref().and_then(|prev| self.node(prev));
        }
        let start = current.and_then(|entry| path.iter().position(|&member| member == entry));
        let mut members: Vec<usize> = start.map_or_else(Vec::new, |start| path[start..].to_vec());
        self.on_cycle.extend(members.iter().copied());
        // Every member but the new one descends from an event that was not valid: none applied,
        // so their own children keep their status; only the members' reasons change.
        members.sort_unstable_by(|&a, &b| self.nodes[a].id.cmp(&self.nodes[b].id));
        for member in members {
            self.attach(member, changed);
        }
    }

    fn set(&mut self, at: usize, status: Status, changed: &mut Vec<usize>) {
        let (old_depth, old_reason) = (self.depth[at], self.reason[at]);
        let created = self.nodes[at].created_us;
        let new_depth = match status {
            Status::Reason(reason) => {
                if old_reason == Some(reason) {
                    return;
                }
                if let Some(old) = old_depth {
                    self.depth[at] = None;
                    self.order.remove(&(created, old, self.nodes[at].id.clone(), at));
                }
                self.reason[at] = Some(reason);
                self.reasons_changed = true;
                None
            }
            Status::Depth(depth) => {
                if old_depth == Some(depth) {
                    return;
                }
                if let Some(old) = old_depth {
                    self.order.remove(&(created, old, self.nodes[at].id.clone(), at));
                }
                if old_reason.is_some() {
                    self.reason[at] = None;
                    self.reasons_changed = true;
                }
                self.depth[at] = Some(depth);
                self.order.insert((created, depth, self.nodes[at].id.clone(), at));
                Some(depth)
            }
        };
        changed.push(at);
        if new_depth != old_depth || old_reason.is_none() {
            // The children's status follows from whether (and how deep) this one applies; a
            // new event's children may have waited for it (missing_prev until now).
            self.dirty.push(at);
        }
    }

    fn find(&mut self, mut item: usize) -> usize {
        while self.parent[item] != item {
            self.parent[item] = self.parent[self.parent[item]];
            item = self.parent[item];
        }
        item
    }

    fn union(&mut self, a: usize, b: usize) {
        let (mut ra, mut rb) = (self.find(a), self.find(b));
        if ra == rb {
            return;
        }
        if self.size[ra] < self.size[rb] {
            std::mem::swap(&mut ra, &mut rb);
        }
        self.parent[rb] = ra;
        self.size[ra] += self.size[rb];
    }
}

/// What [`ChainIndex::set`] gives a node: a depth (it applies) or a reason (it does not).
enum Status {
    Depth(u32),
    Reason(Reason),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (id, prev, chain, instant) of a synthetic node.
    type Spec = (&'static str, Option<&'static str>, u32, i64);

    fn node(&(id, prev, chain, created_us): &Spec) -> Node {
        Node {
            id: Arc::from(id),
            prev: prev.map(Arc::from),
            chain,
            created_us,
        }
    }

    /// Each node's status by id ("0", "1"… a depth, else the reason's code), the apply order
    /// and the forks, after adding `nodes` (then the `invalid` ids) in the order given.
    fn classified(nodes: &[Spec], invalid: &[&str]) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
        let mut index = ChainIndex::default();
        for spec in nodes {
            index.add(node(spec));
        }
        for id in invalid {
            index.add_invalid(&Arc::from(*id));
        }
        summary(&index)
    }

    fn summary(index: &ChainIndex) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
        let mut statuses: Vec<(String, String)> = (0..index.nodes.len())
            .map(|at| {
                let status = match (index.depth[at], index.reason[at]) {
                    (Some(depth), None) => depth.to_string(),
                    (None, Some(reason)) => reason.code().to_owned(),
                    other => panic!("node {at}: neither or both of depth and reason: {other:?}"),
                };
                (index.nodes[at].id.to_string(), status)
            })
            .collect();
        statuses.sort();
        let applied = index.order.iter().map(|key| key.2.to_string()).collect();
        let mut forks: Vec<String> = index
            .forks()
            .map(|(chain, prev, ids)| format!("{chain}/{:?}/{}", prev.map(|at| &*index.nodes[at].id), ids.join(",")))
            .collect();
        forks.sort();
        (statuses, applied, forks)
    }

    fn status(result: &(Vec<(String, String)>, Vec<String>, Vec<String>), id: &str) -> String {
        result
            .0
            .iter()
            .find(|(at, _)| at == id)
            .map(|(_, status)| status.clone())
            .unwrap()
    }

    /// A prev cycle (a → c → b → a), d and e below it, f a root: as tests/test_chains.py's cases.
    fn cycle() -> Vec<Spec> {
        vec![
            ("a", Some("c"), 0, 0),
            ("b", Some("a"), 0, 0),
            ("c", Some("b"), 0, 0),
            ("d", Some("a"), 0, 0),
            ("e", Some("d"), 0, 0),
            ("f", None, 0, 0),
        ]
    }

    /// A child of r for each rule of a prev (§7), and one below an event admitted invalid (bad).
    fn rules() -> Vec<Spec> {
        vec![
            ("r", None, 0, 10),
            ("wrong_chain", Some("r"), 1, 20),
            ("before", Some("r"), 0, 5),
            ("same_instant", Some("r"), 0, 10),
            ("missing", Some("nowhere"), 0, 30),
            ("under_invalid", Some("bad"), 0, 30),
        ]
    }

    /// Forks, late prevs, a prev admitted invalid (x), wrong chains, a cycle.
    fn mixed() -> Vec<Spec> {
        vec![
            ("a", None, 0, 0),
            ("b", Some("a"), 0, 1),
            ("c", Some("b"), 0, 2),
            ("c2", Some("b"), 0, 2),
            ("d", Some("c"), 0, 3),
            ("e", Some("a"), 1, 4),
            ("f", Some("x"), 0, 5),
            ("g", Some("f"), 0, 6),
            ("h", Some("i"), 0, 7),
            ("i", Some("h"), 0, 8),
            ("j", None, 1, 9),
            ("k", Some("j"), 1, 9),
        ]
    }

    #[test]
    fn a_prev_cycle_is_missing_prev_and_what_hangs_below_it_invalid_prev() {
        let result = classified(&cycle(), &[]);
        for id in ["a", "b", "c"] {
            assert_eq!(status(&result, id), "missing_prev");
        }
        for id in ["d", "e"] {
            assert_eq!(status(&result, id), "invalid_prev");
        }
        assert_eq!(result.1, ["f"]);
        let self_loop = classified(&[("a", Some("a"), 0, 0), ("b", Some("a"), 0, 0)], &[]);
        assert_eq!(status(&self_loop, "a"), "missing_prev");
        assert_eq!(status(&self_loop, "b"), "invalid_prev");
        // A tail leading into a cycle: only the cycle's members are on it.
        let tail = [
            ("a", Some("b"), 0, 0),
            ("b", Some("a"), 0, 0),
            ("c", Some("a"), 0, 0),
            ("d", Some("c"), 0, 0),
        ];
        let result = classified(&tail, &[]);
        assert_eq!(
            result.0.iter().map(|(_, status)| status.as_str()).collect::<Vec<_>>(),
            ["missing_prev", "missing_prev", "invalid_prev", "invalid_prev"]
        );
    }

    #[test]
    fn the_rules_of_a_prev_in_order() {
        let result = classified(&rules(), &["bad"]);
        assert_eq!(status(&result, "r"), "0");
        assert_eq!(status(&result, "wrong_chain"), "prev_wrong_chain");
        assert_eq!(status(&result, "before"), "created_before_prev");
        assert_eq!(status(&result, "same_instant"), "1"); // equal instants are fine
        assert_eq!(status(&result, "missing"), "missing_prev");
        assert_eq!(status(&result, "under_invalid"), "invalid_prev");
        assert_eq!(result.1, ["r", "same_instant"]);
    }

    #[test]
    fn a_late_second_successor_makes_a_fork_and_withholds_the_line_below() {
        let mut index = ChainIndex::default();
        index.add(node(&("r", None, 0, 0)));
        assert_eq!(index.add(node(&("a", Some("r"), 0, 1))).len(), 1);
        index.add(node(&("a2", Some("a"), 0, 2)));
        // The second successor of r: a and a2 stop applying, b is a fork too.
        let changed = index.add(node(&("b", Some("r"), 0, 3)));
        let mut moved: Vec<&str> = changed.iter().map(|&at| &*index.nodes[at].id).collect();
        moved.sort_unstable();
        assert_eq!(moved, ["a", "a2", "b"]);
        let result = summary(&index);
        assert_eq!(result.1, ["r"]);
        assert_eq!(result.2, ["0/Some(\"r\")/a,b"]);
        assert_eq!(status(&result, "a2"), "invalid_prev");
        // Extending a chain re-decides one status: the new event's.
        let mut line = ChainIndex::default();
        line.add(node(&("0", None, 0, 0)));
        for (at, (id, prev)) in [("1", "0"), ("2", "1"), ("3", "2")].into_iter().enumerate() {
            assert_eq!(line.add(node(&(id, Some(prev), 0, at as i64 + 1))), [at + 1]);
        }
    }

    /// `classify`'s statuses ("applied", else the reason's code), apply order and forks of `nodes`
    /// (the `invalid` ids admitted too), in [`summary`]'s form: each chain number `n` a chain of
    /// its own (key `k{n}`).
    fn classified_at_once(nodes: &[Spec], invalid: &[&str]) -> (Vec<(String, String)>, Vec<String>, Vec<String>) {
        let events: Vec<ValidEvent> = nodes
            .iter()
            .map(|&(id, prev, chain, created_us)| {
                let key_id = format!("k{chain}");
                let parts = crate::checks::Parts {
                    event_id: id,
                    event_type: "graph_snapshot",
                    target: "graph",
                    created_at: "",
                    key_id: &key_id,
                    prev_event: prev,
                    supersedes: &[],
                    created_us,
                    record: None,
                };
                ValidEvent::new("{}{}".to_owned(), 2, parts).unwrap()
            })
            .collect();
        let valid: Vec<&ValidEvent> = events.iter().collect();
        let classification = classify(&valid, |id| invalid.contains(&id));
        let mut statuses: Vec<(String, String)> = (0..nodes.len())
            .map(|at| (nodes[at].0.to_owned(), String::new()))
            .collect();
        for &at in &classification.applied {
            statuses[at].1 = "applied".to_owned();
        }
        for &(at, reason) in &classification.reasons {
            statuses[at].1 = reason.code().to_owned();
        }
        let applied: Vec<String> = classification
            .applied
            .iter()
            .map(|&at| nodes[at].0.to_owned())
            .collect();
        let mut forks: Vec<String> = classification
            .forks
            .iter()
            .map(|fork| {
                let chain = &fork.chain.1.unwrap()[1..];
                format!("{chain}/{:?}/{}", fork.prev_event, fork.event_ids.join(","))
            })
            .collect();
        forks.sort();
        statuses.sort();
        (statuses, applied, forks)
    }

    #[test]
    fn the_batch_classification_is_the_incremental_one() {
        let mut more = mixed();
        // A missing prev, a later child of an applied prev, a fork of roots.
        more.extend([
            ("l", Some("nowhere"), 1, 9),
            ("m", Some("j"), 1, 8),
            ("r1", None, 2, 0),
            ("r2", None, 2, 1),
        ]);
        let mut cycles = cycle();
        cycles.push(("s", Some("s"), 1, 0)); // its own prev
        let cases = [(more, vec!["x"]), (cycles, vec![]), (rules(), vec!["bad"])];
        for (nodes, invalid) in cases {
            let (statuses, applied, forks) = classified(&nodes, &invalid);
            // The incremental index gives an applied event's depth where the batch one says only
            // that it applied.
            let statuses: Vec<(String, String)> = statuses
                .into_iter()
                .map(|(id, status)| match status.parse::<u32>() {
                    Ok(_) => (id, "applied".to_owned()),
                    Err(_) => (id, status),
                })
                .collect();
            assert_eq!(classified_at_once(&nodes, &invalid), (statuses, applied, forks));
        }
    }

    #[test]
    fn any_arrival_order_gives_the_same_classification() {
        // Forks, late prevs, an invalid prev, wrong chains, a cycle: every order of them.
        let nodes = mixed();
        let expected = classified(&nodes, &["x"]);
        let mut seed: u64 = 38;
        for _ in 0..300 {
            let mut order: Vec<Option<Spec>> = nodes.iter().copied().map(Some).collect();
            order.push(None); // the invalid x, somewhere among them
            for at in (1..order.len()).rev() {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                order.swap(at, (seed >> 33) as usize % (at + 1));
            }
            let mut index = ChainIndex::default();
            for spec in &order {
                match spec {
                    Some(spec) => index.add(node(spec)),
                    None => index.add_invalid(&Arc::from("x")),
                };
            }
            assert_eq!(summary(&index), expected);
        }
    }
}
