//! TEMP stub.
#![allow(missing_docs, dead_code)]
#[derive(Clone, Default)]
pub struct Health;
impl Health {
    pub fn beat(&self) {}
    pub fn set_ready(&self, _b: bool) {}
}
