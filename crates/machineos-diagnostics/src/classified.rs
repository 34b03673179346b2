//! An error turned into data, for where an error crosses a boundary that keeps values, not
//! types: a builder backend's report to the lifecycle, a task's result read by a later
//! reconcile pass.
//!
//! Contract: [`Classified::of`] keeps an error's whole message (its `Display`, which by the
//! crate's convention carries every cause) with its [`Classify`] reason and retry class, so
//! what the library knew about the failure is not lost at the boundary; [`Classified::context`]
//! puts what was being done before the message without changing the class.

use std::fmt;

use crate::{Classify, Retry};

/// An error's message with its classification.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Classified {
    /// The whole message.
    pub message: String,
    /// The error's [`Classify::reason`].
    pub reason: &'static str,
    /// The error's [`Classify::retry`].
    pub retry: Retry,
}

impl Classified {
    /// `e`, classified as it classifies itself.
    pub fn of<E: Classify + fmt::Display + ?Sized>(e: &E) -> Classified {
        Classified {
            message: e.to_string(),
            reason: e.reason(),
            retry: e.retry(),
        }
    }

    /// A failure that no retry mends, under `reason`.
    pub fn permanent(reason: &'static str, message: impl Into<String>) -> Classified {
        Classified {
            message: message.into(),
            reason,
            retry: Retry::Permanent,
        }
    }

    /// The same failure, `what: message`.
    pub fn context(mut self, what: impl fmt::Display) -> Classified {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Classified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Classified {}

impl Classify for Classified {
    fn reason(&self) -> &'static str {
        self.reason
    }
    fn retry(&self) -> Retry {
        self.retry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outage;
    impl fmt::Display for Outage {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("registry answered 503")
        }
    }
    impl Classify for Outage {
        fn reason(&self) -> &'static str {
            "RegistryUnavailable"
        }
        fn retry(&self) -> Retry {
            Retry::Transient
        }
    }

    #[test]
    fn keeps_the_message_and_the_class_through_context() {
        let c = Classified::of(&Outage).context("pushing reg/os:x");
        assert_eq!(c.to_string(), "pushing reg/os:x: registry answered 503");
        assert_eq!(
            (c.reason(), c.retry()),
            ("RegistryUnavailable", Retry::Transient)
        );
        let p = Classified::permanent("InvalidConfig", "bad");
        assert!(!p.is_transient());
        crate::check_chain(&c).unwrap();
    }
}
