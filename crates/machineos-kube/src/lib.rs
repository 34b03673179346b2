//! The one typed Kubernetes layer of machineos: what the controller and the node agent both
//! need to read and write API objects, written once.
//!
//! * [`error`] — [`KubeError`], an API call that failed, naming the operation and the
//!   object, classified ([`machineos_diagnostics::Classify`]: 409, 429, 5xx and transport
//!   errors transient; 400, 403, 422 permanent);
//! * [`mod@view`] — lenient typed views of cached objects: a `DynamicObject`'s JSON read into a
//!   struct whose every field may be absent, so an object a user wrote badly still yields a
//!   view and a [`ViewError`] naming its JSON path (which the caller turns into a
//!   condition) — never a watch that fails forever;
//! * [`mco`] — the views of the MCO objects the controller reads;
//! * [`condition`] — one [`upsert_condition`] for `metav1.Condition`s and the MCO's pool
//!   conditions alike: `lastTransitionTime` moves only when the status does;
//! * [`events`] — [`Events`], the Event recorder: a series per message (a changed message
//!   is a new Event), notes bounded, failures logged (Events are best effort);
//! * [`secret`] — registry credentials from a Secret of either type Kubernetes defines
//!   (`dockerconfigjson`, and the legacy `dockercfg`, converted);
//! * [`time`] — the API's times (RFC 3339 seconds) and this machine's clock.
//!
//! Hand-written on top of kube-rs: what kube-rs leaves to each controller (a status
//! condition's transition rule, error classes for a retry policy, lenient reading of
//! objects whose schema a user may have bent).

pub mod condition;
pub mod error;
pub mod events;
pub mod mco;
pub mod secret;
pub mod time;
pub mod view;

pub use condition::{ConditionView, upsert_condition};
pub use error::{KubeError, api_err, client_config};
pub use events::{Events, truncate};
pub use view::{ViewError, view};
