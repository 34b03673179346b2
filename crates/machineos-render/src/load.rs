//! Loading manifests: bytes of a YAML file (one or more documents, `---`-separated), a JSON
//! file, or a `kind: List` of either, into MachineConfigs and MachineConfigPools. Pure: the
//! caller reads the file and passes its name for the messages. YAML is read as kubectl reads
//! it ([`machineos_goyaml::from_str_documents`]: YAML 1.1's `0644`, `yes`, `on`), so a file
//! gives here what `kubectl apply` of it stores.
//!
//! Errors name the source, the document (1-based, in file order) and, for a field of the
//! wrong shape, the JSON path from the document's root (`$.items.2.spec.kernelArguments`).

use machineos_api::GROUP;
use machineos_api::v1::{MachineConfig, MachineConfigPool};
use machineos_diagnostics::{Classify, Retry};
use serde_json::Value;

/// Objects found in manifests, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Manifests {
    /// The MachineConfigs.
    pub machine_configs: Vec<MachineConfig>,
    /// The MachineConfigPools.
    pub pools: Vec<MachineConfigPool>,
}

/// Why manifests could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// Not UTF-8 text.
    #[error("{file}: not UTF-8 text")]
    NotUtf8 {
        /// The file.
        file: String,
    },
    /// Not YAML or JSON.
    #[error("{file}: {message}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message, with its line and column.
        message: String,
    },
    /// A document that is not a mapping.
    #[error("{file}: document {document}: error at {path}: not an object")]
    NotAnObject {
        /// The file.
        file: String,
        /// 1-based document number.
        document: usize,
        /// JSON path of the value (`$`, or `$.items.N` in a list).
        path: String,
    },
    /// An object of a kind machineos does not read here.
    #[error(
        "{file}: document {document}: error at {path}: unsupported object apiVersion={api_version:?} kind={kind:?} (expected {GROUP}/v1 MachineConfig or MachineConfigPool, or a List of them)"
    )]
    UnsupportedKind {
        /// The file.
        file: String,
        /// 1-based document number.
        document: usize,
        /// JSON path of the object.
        path: String,
        /// Its `apiVersion` (empty when missing).
        api_version: String,
        /// Its `kind` (empty when missing).
        kind: String,
    },
    /// An object of a known kind with a field of the wrong shape.
    #[error(transparent)]
    Decode(Box<DecodeError>),
    /// A MachineConfigPool where only MachineConfigs are expected.
    #[error("{file}: MachineConfigPool {name:?}: expected only MachineConfigs")]
    UnexpectedPool {
        /// The file.
        file: String,
        /// The pool.
        name: String,
    },
}

/// A field of the wrong shape in an object of a known kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: document {document}: {kind} {name:?}: error at {path}: {message}")]
pub struct DecodeError {
    /// The file.
    pub file: String,
    /// 1-based document number.
    pub document: usize,
    /// The kind.
    pub kind: String,
    /// `metadata.name`, empty when missing.
    pub name: String,
    /// JSON path of the field from the document's root.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

impl Classify for LoadError {
    /// `InvalidManifest` (not text, not YAML/JSON, not an object, a field of the wrong shape),
    /// `UnsupportedObjectKind`, or `UnexpectedMachineConfigPool`.
    fn reason(&self) -> &'static str {
        match self {
            LoadError::NotUtf8 { .. }
            | LoadError::Syntax { .. }
            | LoadError::NotAnObject { .. } => "InvalidManifest",
            LoadError::UnsupportedKind { .. } => "UnsupportedObjectKind",
            LoadError::Decode(e) => e.reason(),
            LoadError::UnexpectedPool { .. } => "UnexpectedMachineConfigPool",
        }
    }

    /// Always permanent: the manifests must change (reading the file is the caller's).
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

impl Classify for DecodeError {
    /// `InvalidManifest`.
    fn reason(&self) -> &'static str {
        "InvalidManifest"
    }

    /// Always permanent: the manifest must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// Load MachineConfigs and MachineConfigPools from a file's bytes; `source` names it in
/// errors.
pub fn load_manifests(source: &str, bytes: &[u8]) -> Result<Manifests, LoadError> {
    let text = std::str::from_utf8(bytes).map_err(|_| LoadError::NotUtf8 {
        file: source.to_owned(),
    })?;
    let documents = parse_documents(source, text)?;
    let mut out = Manifests::default();
    let mut document = 0;
    for value in documents {
        if value.is_null() {
            continue; // an empty document, such as a trailing `---`
        }
        document += 1;
        let mut ctx = Ctx {
            source,
            document,
            out: &mut out,
        };
        ctx.object(value, "$".to_owned())?;
    }
    Ok(out)
}

/// Load MachineConfigs only; a MachineConfigPool in the input is an error.
pub fn load_machine_configs(source: &str, bytes: &[u8]) -> Result<Vec<MachineConfig>, LoadError> {
    let m = load_manifests(source, bytes)?;
    if let Some(pool) = m.pools.first() {
        return Err(LoadError::UnexpectedPool {
            file: source.to_owned(),
            name: pool.metadata.name.clone().unwrap_or_default(),
        });
    }
    Ok(m.machine_configs)
}

/// JSON when the text starts with `{` or `[` (one object, or an array of objects), else
/// YAML documents.
fn parse_documents(source: &str, text: &str) -> Result<Vec<Value>, LoadError> {
    let syntax = |message: String| LoadError::Syntax {
        file: source.to_owned(),
        message,
    };
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let value: Value =
            serde_json::from_str(text).map_err(|e| syntax(format!("invalid JSON: {e}")))?;
        return Ok(match value {
            Value::Array(items) => items,
            other => vec![other],
        });
    }
    // As kubectl reads it (YAML 1.1: `0644` is 420, `yes` is true), so a file renders here
    // as the cluster stores it.
    machineos_goyaml::from_str_documents(text).map_err(|e| syntax(format!("invalid YAML: {e}")))
}

struct Ctx<'a> {
    source: &'a str,
    document: usize,
    out: &'a mut Manifests,
}

impl Ctx<'_> {
    fn object(&mut self, value: Value, path: String) -> Result<(), LoadError> {
        let Value::Object(map) = &value else {
            return Err(LoadError::NotAnObject {
                file: self.source.to_owned(),
                document: self.document,
                path,
            });
        };
        let field = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let mcfg = format!("{GROUP}/v1");
        match (api_version.as_str(), kind.as_str()) {
            (v, "MachineConfig") if v == mcfg => {
                let mc = self.decode(value, &kind, &path)?;
                self.out.machine_configs.push(mc);
            }
            (v, "MachineConfigPool") if v == mcfg => {
                let pool = self.decode(value, &kind, &path)?;
                self.out.pools.push(pool);
            }
            ("v1", "List") | (_, "MachineConfigList" | "MachineConfigPoolList")
                if api_version == "v1" || api_version == mcfg =>
            {
                let Value::Object(mut map) = value else {
                    unreachable!("matched as an object above")
                };
                let items = match map.remove("items") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(items)) => items,
                    Some(_) => {
                        return Err(LoadError::Decode(Box::new(DecodeError {
                            file: self.source.to_owned(),
                            document: self.document,
                            kind,
                            name: String::new(),
                            path: format!("{path}.items"),
                            message: "not a list".to_owned(),
                        })));
                    }
                };
                for (i, item) in items.into_iter().enumerate() {
                    self.object(item, format!("{path}.items.{i}"))?;
                }
            }
            _ => {
                return Err(LoadError::UnsupportedKind {
                    file: self.source.to_owned(),
                    document: self.document,
                    path,
                    api_version,
                    kind,
                });
            }
        }
        Ok(())
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        value: Value,
        kind: &str,
        path: &str,
    ) -> Result<T, LoadError> {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        serde_path_to_error::deserialize(value).map_err(|e| {
            let mut field = path.to_owned();
            for segment in e.path().iter() {
                match segment {
                    serde_path_to_error::Segment::Map { key } => {
                        field.push('.');
                        field.push_str(key);
                    }
                    serde_path_to_error::Segment::Seq { index } => {
                        field.push_str(&format!(".{index}"));
                    }
                    serde_path_to_error::Segment::Enum { .. }
                    | serde_path_to_error::Segment::Unknown => {}
                }
            }
            LoadError::Decode(Box::new(DecodeError {
                file: self.source.to_owned(),
                document: self.document,
                kind: kind.to_owned(),
                name,
                path: field,
                message: e.inner().to_string(),
            }))
        })
    }
}
