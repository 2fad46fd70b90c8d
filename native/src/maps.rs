//! The hash maps of the compiled path: std's, with foldhash (seeded per process, as std's are,
//! against crafted collisions; much faster on long keys such as whole JSON texts). No result
//! depends on their order.

pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
pub type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;
