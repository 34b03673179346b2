//! The render controller's executor: a [`RenderPlan`] → API writes (the rendered
//! MachineConfig created, the pool's `spec.configuration`, its `status.configuration` and
//! `RenderDegraded`). Thin: [`super::plan::plan`] decided everything.

use kube::Client;
use serde_json::{Value, json};

use super::plan::RenderPlan;
use crate::api::{ExecError, conditions_of, create, edit_status, merge, set_condition};
use crate::kinds;
use machineos_kube::ConditionView;

/// Carry out a render plan.
pub(crate) async fn render(client: &Client, plan: &RenderPlan) -> Result<(), ExecError> {
    let pools = kinds::all(client, &kinds::pool());
    if let Some(mc) = &plan.create {
        let name = mc
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        create(
            &kinds::all(client, &kinds::machine_config()),
            mc.clone(),
            format!("MachineConfig {name}"),
        )
        .await?;
    }
    if let Some(c) = &plan.spec_configuration {
        merge(
            &pools,
            &plan.pool,
            json!({"spec": {"configuration": c}}),
            format!("MachineConfigPool {}", plan.pool),
        )
        .await?;
    }
    if plan.status_configuration.is_some() || plan.condition.is_some() {
        edit_status(
            &pools,
            &plan.pool,
            format!("MachineConfigPool {}", plan.pool),
            |_, status| {
                if let Some(c) = &plan.status_configuration {
                    status["configuration"] = c.clone();
                }
                if let Some(c) = &plan.condition {
                    let mut list = conditions_of(status);
                    set_condition(&mut list, c);
                    status["conditions"] = ConditionView::to_json(&list);
                }
                true
            },
        )
        .await?;
    }
    Ok(())
}
