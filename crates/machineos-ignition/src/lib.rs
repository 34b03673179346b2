//! Ignition spec 3.x for machineos: parse (3.0.0–3.6.0) into one model (3.6.0's), validate
//! with Ignition's rules and messages, decode `data:` resources, and merge configs.
//!
//! Modes: setuid/setgid/sticky bits are honoured from spec 3.6.0 on. [`parse()`] masks them
//! out of older configs as Ignition does (with Ignition's warning); [`parse_unmasked`] keeps
//! every mode as written, for a renderer, and [`mask_special_bits`] is the masking step alone.
//!
//! Pure: every function takes bytes or values, none touches the filesystem or network. So
//! every error ([`ParseError`], [`ValidationError`], [`children::ChildError`],
//! [`resource::FetchError`], [`dataurl::DataUrlError`]) is
//! [`Permanent`](machineos_diagnostics::Retry::Permanent) in its
//! [`Classify`](machineos_diagnostics::Classify) implementation, with a reason naming the kind
//! of failure (`InvalidConfig`, `EmptyConfig`, `UnsupportedSpecVersion`, `InvalidDataUrl`,
//! `UnsupportedSource`, …); its message tells the whole story, causes included, and none
//! exposes a cause as `source()`. Warnings are [`Warning`]s (`{ path, message }`).

pub mod children;
pub mod dataurl;
pub mod merge;
pub mod model;
pub mod parse;
pub mod resource;
pub mod unit;
pub mod validate;

pub use model::Config;
pub use parse::{
    ParseError, Parsed, SpecVersion, Warning, mask_special_bits, parse, parse_unmasked,
};
pub use validate::{ValidationError, validate};
