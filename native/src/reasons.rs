//! Reason codes (spec §6, §7): why an admitted event is invalid, as `merge.reasons.Reason`
//! says them, in its order. A reason is a [`Reason`], never a string looked up at run time, so
//! a misspelt one does not compile; its spec string is [`Reason::code`], which the state (§9)
//! is written with and `pith_merge_native.REASONS` hands to Python (`tests/test_native.py`
//! holds that list to `merge.reasons.Reason`, in order).

/// The enum, its list in order and its spec strings, from one table: none can miss a reason.
macro_rules! reasons {
    ($($(#[$doc:meta])* $name:ident = $code:literal,)*) => {
        /// Why an admitted event did not apply; the discriminant is the position in
        /// `merge.reasons.Reason`, so the §6 checks compare by how far down the list they got.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        pub enum Reason {
            $($(#[$doc])* $name,)*
        }

        impl Reason {
            /// Every reason, in order.
            pub const ALL: &'static [Reason] = &[$(Reason::$name,)*];

            /// The exact string of the spec.
            pub const fn code(self) -> &'static str {
                match self {
                    $(Reason::$name => $code,)*
                }
            }
        }
    };
}

reasons! {
    // §6 stateless checks, in the order they run: the first failure is the reason.
    NonCanonicalJson = "non_canonical_json",
    UnsupportedSchemaVersion = "unsupported_schema_version",
    Malformed = "malformed",
    EventIdMismatch = "event_id_mismatch",
    ContentHashMismatch = "content_hash_mismatch",
    WrongSubject = "wrong_subject",
    UnknownEventType = "unknown_event_type",
    TargetMismatch = "target_mismatch",
    UnknownKey = "unknown_key",
    KeyMismatch = "key_mismatch",
    UnsupportedSignature = "unsupported_signature",
    BadSignature = "bad_signature",
    KeyExpired = "key_expired",
    RecordNotGenesis = "record_not_genesis",
    BadPayload = "bad_payload",
    BadReceipt = "bad_receipt",
    // §7 chain rules.
    MissingPrev = "missing_prev",
    InvalidPrev = "invalid_prev",
    PrevWrongChain = "prev_wrong_chain",
    CreatedBeforePrev = "created_before_prev",
    Equivocation = "equivocation",
}

impl Reason {
    /// The §6 checks in order: a copy that fails later got "further down the list" (§5).
    pub const CHECK_ORDER: &'static [Reason] = Reason::ALL.split_at(Reason::MissingPrev as usize).0;

    /// The §6 check whose spec string is `code`, if any (a §7 reason is no check's).
    pub fn check(code: &str) -> Option<Reason> {
        Reason::CHECK_ORDER.iter().copied().find(|reason| reason.code() == code)
    }
}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn each_reason_stands_at_its_discriminant() {
        for (at, reason) in Reason::ALL.iter().enumerate() {
            assert_eq!(*reason as usize, at);
        }
        assert_eq!(Reason::ALL.len(), 21);
        assert_eq!(Reason::CHECK_ORDER.last(), Some(&Reason::BadReceipt));
    }

    #[test]
    fn only_checks_are_read_back_from_their_codes() {
        for reason in Reason::CHECK_ORDER {
            assert_eq!(Reason::check(reason.code()), Some(*reason));
        }
        assert_eq!(Reason::check("equivocation"), None);
        assert_eq!(Reason::check("no_such_reason"), None);
    }
}
