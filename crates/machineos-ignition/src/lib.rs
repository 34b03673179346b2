//! Ignition spec 3.x for machineos: parse (3.0.0–3.5.0) into one model, validate with
//! Ignition's rules and messages, decode `data:` resources, and merge configs.
//!
//! Pure: every function takes bytes or values, none touches the filesystem or network.

pub mod children;
pub mod dataurl;
pub mod merge;
pub mod model;
pub mod parse;
pub mod resource;
pub mod unit;
pub mod validate;

pub use model::Config;
pub use parse::{ParseError, Parsed, SpecVersion, Warning, parse};
pub use validate::{ValidationError, validate};
