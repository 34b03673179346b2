//! MachineConfiguration: the MCO operator's cluster-wide settings — node disruption policies,
//! managed boot images, boot image skew enforcement, irreconcilable-change overrides — as
//! openshift/api's `operator/v1` declares it, with every validation marker (bounds, enums,
//! list types, CEL rules) its shipped CRD carries.
//!
//! machineos acts on `spec.nodeDisruptionPolicy` of the object named `cluster` and writes the
//! merged policies to `status.nodeDisruptionPolicyStatus.clusterPolicies` (the merge and the
//! rules live in `machineos-disruption`, which reads the object as JSON). The other fields
//! are here so an OpenShift manifest applies unchanged; machineos does not act on them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::schema::{label_selector, metav1_conditions, push_rule};
use crate::serde_util::{is_zero_i32, is_zero_i64};

/// MachineConfigurationSpec is the specification of the desired behavior of the Machine
/// Config Operator.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operator.openshift.io",
    version = "v1",
    kind = "MachineConfiguration",
    plural = "machineconfigurations",
    status = "MachineConfigurationStatus",
    derive = "PartialEq",
    derive = "Default",
    doc = "MachineConfiguration provides information to configure an operator to manage Machine Configuration.",
    validation = Rule::new(
        "self.?status.bootImageSkewEnforcementStatus.mode.orValue(\"\") == 'Automatic' ? self.?spec.managedBootImages.hasValue() || self.?status.managedBootImagesStatus.hasValue() : true"
    )
    .message("when skew enforcement is in Automatic mode, a boot image configuration is required"),
    validation = Rule::new(
        "self.?status.bootImageSkewEnforcementStatus.mode.orValue(\"\") == 'Automatic' ? !(self.?spec.managedBootImages.machineManagers.hasValue()) || size(self.spec.managedBootImages.machineManagers) > 0 : true"
    )
    .message("when skew enforcement is in Automatic mode, managedBootImages.machineManagers must not be an empty list"),
    validation = Rule::new(
        "self.?status.bootImageSkewEnforcementStatus.mode.orValue(\"\") == 'Automatic' ? !(self.?spec.managedBootImages.machineManagers.hasValue()) || !self.spec.managedBootImages.machineManagers.exists(m, m.resource == 'machinesets' && m.apiGroup == 'machine.openshift.io') || self.spec.managedBootImages.machineManagers.exists(m, m.resource == 'machinesets' && m.apiGroup == 'machine.openshift.io' && m.selection.mode == 'All') : true"
    )
    .message("when skew enforcement is in Automatic mode, any MachineAPI MachineSet MachineManager must use selection mode 'All'"),
    validation = Rule::new(
        "self.?status.bootImageSkewEnforcementStatus.mode.orValue(\"\") == 'Automatic' ? !(self.?status.managedBootImagesStatus.machineManagers.hasValue()) || self.status.managedBootImagesStatus.machineManagers.exists(m, m.selection.mode == 'All' && m.resource == 'machinesets' && m.apiGroup == 'machine.openshift.io'): true"
    )
    .message("when skew enforcement is in Automatic mode, managedBootImagesStatus must contain a MachineManager opting in all MachineAPI MachineSets")
)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationSpec {
    /// managementState indicates whether and how the operator should manage the component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        with = "String",
        regex(pattern = r"^(Managed|Unmanaged|Force|Removed)$")
    )]
    pub management_state: Option<String>,

    /// logLevel is an intent based logging for an overall component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "log_level")]
    pub log_level: Option<String>,

    /// operatorLogLevel is an intent based logging for the operator itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "log_level")]
    pub operator_log_level: Option<String>,

    /// unsupportedConfigOverrides overrides the final configuration that was computed by the
    /// operator; not supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form")]
    pub unsupported_config_overrides: Option<Value>,

    /// observedConfig holds a sparse config that the controller has observed from the cluster
    /// state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form")]
    pub observed_config: Option<Value>,

    /// forceRedeploymentReason can be used to force the redeployment of the operand by
    /// providing a unique string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub force_redeployment_reason: Option<String>,

    /// failedRevisionLimit is the number of failed static pod installer revisions to keep on
    /// disk and in the api.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(transform = crate::schema::no_default)]
    pub failed_revision_limit: i32,

    /// succeededRevisionLimit is the number of successful static pod installer revisions to
    /// keep on disk and in the api.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    #[schemars(transform = crate::schema::no_default)]
    pub succeeded_revision_limit: i32,

    /// managedBootImages allows configuration for the management of boot images for
    /// machine resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ManagedBootImages")]
    pub managed_boot_images: Option<ManagedBootImages>,

    /// nodeDisruptionPolicy allows an admin to set granular node disruption actions for
    /// MachineConfig-based updates, such as drains, service reloads, etc.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "NodeDisruptionPolicyConfig")]
    pub node_disruption_policy: Option<NodeDisruptionPolicyConfig>,

    /// irreconcilableValidationOverrides is used to skip validation of changes the MCO
    /// cannot reconcile on existing nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "IrreconcilableValidationOverrides")]
    pub irreconcilable_validation_overrides: Option<IrreconcilableValidationOverrides>,

    /// bootImageSkewEnforcement allows an admin to configure how boot image version skew is
    /// enforced on the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BootImageSkewEnforcementConfig")]
    pub boot_image_skew_enforcement: Option<BootImageSkewEnforcementConfig>,
}

/// MachineConfigurationStatus: what the operator observed and published.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineConfigurationStatus {
    /// observedGeneration is the last generation change you've dealt with.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    #[schemars(transform = crate::schema::no_default)]
    pub observed_generation: i64,

    /// conditions is a list of conditions and their status.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]),
        transform = metav1_conditions
    )]
    pub conditions: Vec<Condition>,

    /// nodeDisruptionPolicyStatus status reflects what the latest cluster-validated policies
    /// are, and will be used by the Machine Config Daemon during future node updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "NodeDisruptionPolicyStatus")]
    pub node_disruption_policy_status: Option<NodeDisruptionPolicyStatus>,

    /// managedBootImagesStatus reflects what the latest cluster-validated boot image
    /// configuration is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ManagedBootImages")]
    pub managed_boot_images_status: Option<ManagedBootImages>,

    /// bootImageSkewEnforcementStatus reflects what the latest cluster-validated boot image
    /// skew enforcement configuration is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "BootImageSkewEnforcementStatus")]
    pub boot_image_skew_enforcement_status: Option<BootImageSkewEnforcementStatus>,
}

/// The node disruption policies an admin sets.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyConfig {
    /// files is a list of MachineConfig file definitions and actions to take on changes to
    /// those paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 50),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["path"])
    )]
    pub files: Vec<NodeDisruptionPolicyFile<SpecActionType>>,

    /// units is a list of MachineConfig unit definitions and actions to take on changes to
    /// those services.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 50),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub units: Vec<NodeDisruptionPolicyUnit<SpecActionType>>,

    /// sshkey maps to the ignition.sshkeys field in the MachineConfig object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "NodeDisruptionPolicySshKey<SpecActionType>")]
    pub sshkey: Option<NodeDisruptionPolicySshKey<SpecActionType>>,
}

/// Where the merged policies are published.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyStatus {
    /// clusterPolicies is a merge of cluster default and user provided node disruption
    /// policies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "NodeDisruptionPolicyClusterStatus")]
    pub cluster_policies: Option<NodeDisruptionPolicyClusterStatus>,
}

/// The merged policies (the defaults with the user's entries).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyClusterStatus {
    /// files is a list of MachineConfig file definitions and actions to take on changes to
    /// those paths.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 100),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["path"])
    )]
    pub files: Vec<NodeDisruptionPolicyFile<StatusActionType>>,

    /// units is a list of MachineConfig unit definitions and actions to take on changes to
    /// those services.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 100),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub units: Vec<NodeDisruptionPolicyUnit<StatusActionType>>,

    /// sshkey is the overall sshkey MachineConfig definition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "NodeDisruptionPolicySshKey<StatusActionType>")]
    pub sshkey: Option<NodeDisruptionPolicySshKey<StatusActionType>>,
}

/// A file path and the actions a change to it needs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyFile<T: JsonSchema> {
    /// path is the location of a file being managed through a MachineConfig; a policy for a
    /// directory covers the files under it.
    pub path: String,
    /// actions the node takes when the file changes.
    #[schemars(length(max = 10), extend("x-kubernetes-list-type" = "atomic"), transform = standalone_actions)]
    pub actions: Vec<NodeDisruptionPolicyAction<T>>,
}

/// A systemd unit and the actions a change to it needs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicyUnit<T: JsonSchema> {
    /// name represents the service name of a systemd service managed through a
    /// MachineConfig.
    #[schemars(length(max = 255), transform = service_name)]
    pub name: String,
    /// actions the node takes when the unit changes.
    #[schemars(length(max = 10), extend("x-kubernetes-list-type" = "atomic"), transform = standalone_actions)]
    pub actions: Vec<NodeDisruptionPolicyAction<T>>,
}

/// The actions a change of the SSH keys needs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeDisruptionPolicySshKey<T: JsonSchema> {
    /// actions the node takes when the SSH keys change.
    #[schemars(length(max = 10), extend("x-kubernetes-list-type" = "atomic"), transform = standalone_actions)]
    pub actions: Vec<NodeDisruptionPolicyAction<T>>,
}

/// One action; `reload` and `restart` are given exactly with their type.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    transform = reload_with_type,
    transform = restart_with_type
)]
pub struct NodeDisruptionPolicyAction<T: JsonSchema> {
    /// type represents the commands that will be carried out if this action is taken.
    #[serde(rename = "type")]
    pub type_: T,
    /// reload specifies the service to reload, only valid if type is Reload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ServiceReference")]
    pub reload: Option<ServiceReference>,
    /// restart specifies the service to restart, only valid if type is Restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ServiceReference")]
    pub restart: Option<ServiceReference>,
}

/// The service a `Reload` or `Restart` action names.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceReference {
    /// serviceName is the full name (e.g. crio.service) of the service.
    #[schemars(length(max = 255), transform = service_name)]
    pub service_name: String,
}

/// The action types a user may write.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SpecActionType {
    /// Reboot the node.
    #[default]
    Reboot,
    /// Drain the node.
    Drain,
    /// Reload a service.
    Reload,
    /// Restart a service.
    Restart,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Nothing.
    None,
}

/// The action types the merged policies may hold: the user's, and `Special` (the MCO's
/// handling of `/etc/containers/registries.conf`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StatusActionType {
    /// Reboot the node.
    #[default]
    Reboot,
    /// Drain the node.
    Drain,
    /// Reload a service.
    Reload,
    /// Restart a service.
    Restart,
    /// `systemctl daemon-reload`.
    DaemonReload,
    /// Nothing.
    None,
    /// The MCO's registries.conf handling.
    Special,
}

/// Which machine resources get their boot images managed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagedBootImages {
    /// machineManagers can be used to register machine management resources for boot image
    /// updates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 5),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["resource", "apiGroup"])
    )]
    pub machine_managers: Vec<MachineManager>,
}

/// A machine resource type and which of its objects get boot image updates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self.resource != 'controlplanemachinesets' || self.selection.mode == 'All' || self.selection.mode == 'None'",
    "message": "Only All or None selection mode is permitted for ControlPlaneMachineSets"
}]))]
pub struct MachineManager {
    /// resource is the machine management resource's type.
    pub resource: MachineManagerResource,
    /// apiGroup is name of the APIGroup that the machine management resource belongs to.
    pub api_group: MachineManagerApiGroup,
    /// selection allows granular control of the machine management resources that will be
    /// registered for boot image updates.
    pub selection: MachineManagerSelector,
}

/// The machine management resources.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineManagerResource {
    /// MachineSets.
    #[serde(rename = "machinesets")]
    MachineSets,
    /// ControlPlaneMachineSets.
    #[serde(rename = "controlplanemachinesets")]
    ControlPlaneMachineSets,
}

/// The API group of the machine management resources.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MachineManagerApiGroup {
    /// The Machine API.
    #[serde(rename = "machine.openshift.io")]
    MachineApi,
}

/// All, some (by label) or none of a resource's objects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.mode) && self.mode == 'Partial' ?  has(self.partial) : !has(self.partial)",
    "message": "Partial is required when type is partial, and forbidden otherwise"
}]))]
pub struct MachineManagerSelector {
    /// mode determines how machine managers will be selected for updates.
    pub mode: SelectorMode,
    /// partial provides label selector(s) that can be used to match machine management
    /// resources; only permitted when mode is Partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PartialSelector")]
    pub partial: Option<PartialSelector>,
}

/// The selection modes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SelectorMode {
    /// Every object.
    All,
    /// The objects a label selector matches.
    Partial,
    /// No object.
    None,
}

/// The label selector of a Partial selection.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PartialSelector {
    /// machineResourceSelector is a label selector that can be used to select machine
    /// resources like MachineSets.
    #[schemars(schema_with = "label_selector")]
    pub machine_resource_selector: LabelSelector,
}

/// Ignition storage sections whose changes the MCO stops refusing on existing nodes.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct IrreconcilableValidationOverrides {
    /// storage lists the storage sections (Disks, FileSystems, Raid) whose changes are
    /// allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1, max = 3), extend("x-kubernetes-list-type" = "set"))]
    pub storage: Vec<StorageOverride>,
}

/// The Ignition storage sections an override can name.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum StorageOverride {
    /// `storage.disks`.
    Disks,
    /// `storage.filesystems`.
    FileSystems,
    /// `storage.raid`.
    Raid,
}

/// How boot image version skew is enforced (spec).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.mode) && (self.mode =='Manual') ?  has(self.manual) : !has(self.manual)",
    "message": "manual is required when mode is Manual, and forbidden otherwise"
}]))]
pub struct BootImageSkewEnforcementConfig {
    /// mode determines the underlying behavior of skew enforcement.
    pub mode: SkewEnforcementMode,
    /// manual describes the current boot image of the cluster; only with mode Manual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ClusterBootImageManual")]
    pub manual: Option<ClusterBootImageManual>,
}

/// The skew enforcement modes an admin can set.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SkewEnforcementMode {
    /// The admin states the cluster's boot image.
    Manual,
    /// No enforcement.
    None,
}

/// How boot image version skew is enforced (status).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.mode) && (self.mode == 'Automatic') ?  has(self.automatic) : !has(self.automatic)",
        "message": "automatic is required when mode is Automatic, and forbidden otherwise"
    },
    {
        "rule": "has(self.mode) && (self.mode == 'Manual') ?  has(self.manual) : !has(self.manual)",
        "message": "manual is required when mode is Manual, and forbidden otherwise"
    }
]))]
pub struct BootImageSkewEnforcementStatus {
    /// mode determines the underlying behavior of skew enforcement.
    pub mode: SkewEnforcementModeStatus,
    /// automatic describes the current boot image of the cluster, updated by the MCO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ClusterBootImageAutomatic")]
    pub automatic: Option<ClusterBootImageAutomatic>,
    /// manual describes the current boot image of the cluster, as the admin stated it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "ClusterBootImageManual")]
    pub manual: Option<ClusterBootImageManual>,
}

/// The skew enforcement modes the status reports.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SkewEnforcementModeStatus {
    /// The MCO keeps the boot images current.
    Automatic,
    /// The admin states the cluster's boot image.
    Manual,
    /// No enforcement.
    None,
}

/// The cluster's boot image as an admin states it: by OCP or by RHCOS version.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "has(self.mode) && (self.mode =='OCPVersion') ?  has(self.ocpVersion) : !has(self.ocpVersion)",
        "message": "ocpVersion is required when mode is OCPVersion, and forbidden otherwise"
    },
    {
        "rule": "has(self.mode) && (self.mode =='RHCOSVersion') ?  has(self.rhcosVersion) : !has(self.rhcosVersion)",
        "message": "rhcosVersion is required when mode is RHCOSVersion, and forbidden otherwise"
    }
]))]
pub struct ClusterBootImageManual {
    /// mode is used to configure which boot image field is defined.
    pub mode: ManualMode,
    /// ocpVersion is the OCP version (`x.y.z`) the boot image was released with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 5, max = 10), transform = ocp_version)]
    pub ocp_version: Option<String>,
    /// rhcosVersion is the RHCOS version of the boot image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 14, max = 21), transform = rhcos_version)]
    pub rhcos_version: Option<String>,
}

/// Which version a manual boot image statement gives.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ManualMode {
    /// By OCP version.
    #[serde(rename = "OCPVersion")]
    OcpVersion,
    /// By RHCOS version.
    #[serde(rename = "RHCOSVersion")]
    RhcosVersion,
}

/// The cluster's boot image as the MCO found it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend(
    "minProperties" = 1,
    "x-kubernetes-validations" = [{
        "rule": "has(self.ocpVersion) || has(self.rhcosVersion)",
        "message": "at least one of ocpVersion or rhcosVersion is required"
    }]
))]
pub struct ClusterBootImageAutomatic {
    /// ocpVersion is the OCP version (`x.y.z`) the boot image was released with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 5, max = 10), transform = ocp_version)]
    pub ocp_version: Option<String>,
    /// rhcosVersion is the RHCOS version of the boot image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 14, max = 21), transform = rhcos_version)]
    pub rhcos_version: Option<String>,
}

/// openshift/api's log levels, `Normal` by default.
fn log_level(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "default": "Normal",
        "enum": ["", "Normal", "Debug", "Trace", "TraceAll"],
    })
}

/// A nullable object of any shape (`observedConfig`, `unsupportedConfigOverrides`).
fn free_form(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "nullable": true,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// A systemd unit name: `<name>.<unit type>`.
fn service_name(schema: &mut Schema) {
    push_rule(
        schema,
        r"self.matches('\\.(service|socket|device|mount|automount|swap|target|path|timer|snapshot|slice|scope)$')",
        r#"Invalid ${SERVICETYPE} in service name. Expected format is ${NAME}${SERVICETYPE}, where ${SERVICETYPE} must be one of ".service", ".socket", ".device", ".mount", ".automount", ".swap", ".target", ".path", ".timer",".snapshot", ".slice" or ".scope"."#,
    );
    push_rule(
        schema,
        r"self.matches('^[a-zA-Z0-9:._\\\\-]+\\..')",
        r#"Invalid ${NAME} in service name. Expected format is ${NAME}${SERVICETYPE}, where {NAME} must be atleast 1 character long and can only consist of alphabets, digits, ":", "-", "_", ".", and "\""#,
    );
}

/// `Reboot` and `None` only alone in an action list.
fn standalone_actions(schema: &mut Schema) {
    push_rule(
        schema,
        "self.exists(x, x.type=='Reboot') ? size(self) == 1 : true",
        "Reboot action can only be specified standalone, as it will override any other actions",
    );
    push_rule(
        schema,
        "self.exists(x, x.type=='None') ? size(self) == 1 : true",
        "None action can only be specified standalone, as it will override any other actions",
    );
}

/// `reload` exactly with type `Reload`.
fn reload_with_type(schema: &mut Schema) {
    push_rule(
        schema,
        "has(self.type) && self.type == 'Reload' ? has(self.reload) : !has(self.reload)",
        "reload is required when type is Reload, and forbidden otherwise",
    );
}

/// `restart` exactly with type `Restart`.
fn restart_with_type(schema: &mut Schema) {
    push_rule(
        schema,
        "has(self.type) && self.type == 'Restart' ? has(self.restart) : !has(self.restart)",
        "restart is required when type is Restart, and forbidden otherwise",
    );
}

/// An OCP version, `x.y.z`.
fn ocp_version(schema: &mut Schema) {
    push_rule(
        schema,
        r"self.matches('^[0-9]+\\.[0-9]+\\.[0-9]+$')",
        "ocpVersion must match the OCP semver compatible format of x.y.z",
    );
}

/// An RHCOS version, `major.minor.YYYYMMDD-N` or the legacy `major.minor.YYYYMMDDHHmm-N`.
fn rhcos_version(schema: &mut Schema) {
    push_rule(
        schema,
        r"self.matches('^[0-9]+\\.[0-9]+\\.([0-9]{8}|[0-9]{12})-[0-9]+$')",
        "rhcosVersion must match format [major].[minor].[datestamp(YYYYMMDD)]-[buildnumber] or must match legacy format [major].[minor].[timestamp(YYYYMMDDHHmm)]-[buildnumber]",
    );
}
