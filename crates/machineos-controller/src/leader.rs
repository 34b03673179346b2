//! TEMP stub.
#![allow(missing_docs, dead_code)]
#[derive(Clone)]
pub struct Leadership {
    rx: tokio::sync::watch::Receiver<bool>,
}
impl Leadership {
    pub fn always() -> Self {
        let (tx, rx) = tokio::sync::watch::channel(true);
        std::mem::forget(tx);
        Leadership { rx }
    }
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }
    pub async fn changed(&mut self) {
        if self.rx.changed().await.is_err() {
            std::future::pending::<()>().await
        }
    }
}
