//! TEMP stub (replaced by the helper's module on merge).
#![allow(missing_docs, dead_code)]
#[derive(Clone, Default)]
pub struct Metrics;
impl Metrics {
    pub fn new() -> Self {
        Metrics
    }
    pub fn queue_time(&self, _s: f64) {}
    pub fn push(&self, _pool: &str, _ok: bool, _s: f64) {}
    pub fn reconcile(&self, _r: &str, _reason: &str) {}
    pub fn reconcile_duration(&self, _s: f64) {}
    pub fn set_active_builds(&self, _n: i64) {}
    pub fn build_state(&self, _p: &str, _s: &str) {}
    pub fn build_finished(&self, _p: &str, _s: &str, _secs: f64) {}
    pub fn config_change(&self, _p: &str) {}
    pub fn render(&self, _p: &str, _ok: bool) {}
    pub fn set_leader(&self, _b: bool) {}
}
