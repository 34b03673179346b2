//! The validator's pieces, one keyword or rule semantic per table entry, with the exact
//! kube-apiserver error text each must produce.

use machineos_crd_validation::{Errors, Validator};
use serde_json::{Value, json};

fn schema(spec: Value, status: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        }
    })
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "spec": spec})
}

fn create_err(spec_schema: Value, spec: Value) -> String {
    let v = Validator::new(&schema(spec_schema, json!({"type": "object"})), true).unwrap();
    match v.validate_create(&obj(spec)) {
        Ok(o) => format!("accepted: {o}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn keywords() {
    let s = |props: Value| json!({"type": "object", "properties": props});
    let cases: Vec<(Value, Value, &str)> = vec![
        (
            s(json!({"a": {"type": "integer"}})),
            json!({"a": "x"}),
            r#"spec.a: Invalid value: "string": spec.a in body must be of type integer: "string""#,
        ),
        (
            s(json!({"a": {"type": "string", "enum": ["b", "c"]}})),
            json!({"a": "a"}),
            r#"spec.a: Unsupported value: "a": supported values: "b", "c""#,
        ),
        (
            json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}),
            json!({}),
            "spec.a: Required value",
        ),
        (
            s(json!({"a": {"type": "string", "maxLength": 3}})),
            json!({"a": "ääää"}),
            "spec.a: Too long: may not be more than 3 bytes",
        ),
        (
            s(json!({"a": {"type": "string", "maxLength": 4}})),
            json!({"a": "ääää"}),
            "accepted",
        ),
        (
            s(json!({"a": {"type": "string", "minLength": 1}})),
            json!({"a": ""}),
            r#"spec.a: Invalid value: "": spec.a in body should be at least 1 chars long"#,
        ),
        (
            s(json!({"a": {"type": "string", "pattern": "^[a-z]+$"}})),
            json!({"a": "A"}),
            r#"spec.a: Invalid value: "A": spec.a in body should match '^[a-z]+$'"#,
        ),
        (
            s(json!({"a": {"type": "integer", "minimum": 0}})),
            json!({"a": -1}),
            "spec.a: Invalid value: -1: spec.a in body should be greater than or equal to 0",
        ),
        (
            s(json!({"a": {"type": "integer", "maximum": 10, "exclusiveMaximum": true}})),
            json!({"a": 10}),
            "spec.a: Invalid value: 10: spec.a in body should be less than 10",
        ),
        (
            s(json!({"a": {"type": "array", "maxItems": 1, "items": {"type": "string"}}})),
            json!({"a": ["x", "y"]}),
            "spec.a: Too many: 2: must have at most 1 item",
        ),
        (
            s(json!({"a": {"type": "array", "minItems": 1, "items": {"type": "string"}}})),
            json!({"a": []}),
            "spec.a: Invalid value: 0: spec.a in body should have at least 1 items",
        ),
        (
            s(json!({"a": {"type": "string", "format": "date-time"}})),
            json!({"a": "yesterday"}),
            r#"spec.a: Invalid value: "yesterday": spec.a in body must be of type date-time: "yesterday""#,
        ),
        (
            s(json!({"a": {"x-kubernetes-int-or-string": true}})),
            json!({"a": true}),
            r#"spec.a: Invalid value: "boolean": spec.a in body must be of type integer,string: "boolean""#,
        ),
        (
            s(json!({"a": {"x-kubernetes-int-or-string": true}})),
            json!({"a": "50%"}),
            "accepted",
        ),
        (
            s(json!({"m": {"type": "object", "additionalProperties": {"type": "integer"}}})),
            json!({"m": {"k": "v"}}),
            r#"spec.m.k: Invalid value: "string": spec.m.k in body must be of type integer: "string""#,
        ),
        (
            s(
                json!({"l": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}}),
            ),
            json!({"l": ["a", "b", "a"]}),
            r#"spec.l[2]: Duplicate value: "a""#,
        ),
        (
            s(
                json!({"l": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}}),
            ),
            json!({"l": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]}),
            r#"spec.l[1]: Duplicate value: map[string]interface {}{"name":"a"}"#,
        ),
        (
            s(json!({"a": {"type": "string", "nullable": true, "maxLength": 1}})),
            json!({"a": null}),
            "accepted",
        ),
    ];
    for (sch, spec, want) in cases {
        let got = create_err(sch.clone(), spec.clone());
        if want == "accepted" {
            assert!(got.starts_with("accepted"), "{sch} / {spec}: {got}");
        } else {
            assert_eq!(got, want, "{sch} / {spec}");
        }
    }
}

#[test]
fn cel_rules_and_blocking_errors() {
    let sch = json!({
        "type": "object",
        "required": ["a"],
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": "self.a == 'x'", "message": "a must be x"},
            {"rule": "!has(self.b) || self.b.startsWith('y')"},
            {"rule": "self.a.size() > 5", "messageExpression": "'a is ' + self.a", "reason": "FieldValueForbidden"},
            {"rule": "self.a != 'q'", "fieldPath": ".a"},
        ]
    });
    assert_eq!(
        create_err(sch.clone(), json!({"a": "x", "b": "z"})),
        "[spec: Invalid value: \"object\": failed rule: !has(self.b) || self.b.startsWith('y'), spec: Forbidden: a is x]"
    );
    assert_eq!(
        create_err(sch.clone(), json!({"a": "q"})),
        "[spec: Invalid value: \"object\": a must be x, spec: Forbidden: a is q, spec.a: Invalid value: \"object\": failed rule: self.a != 'q']"
    );
    // A blocking error (Required) skips CEL and says so.
    assert_eq!(
        create_err(sch, json!({})),
        "[spec.a: Required value, <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
}

fn pool_like() -> Validator {
    Validator::new(
        &schema(
            json!({"type": "object", "properties": {"x": {"type": "string"}},
                   "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "spec is immutable"}]}),
            json!({"type": "object", "properties": {
                "gen": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "gen must not decrease"}]},
                "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "properties": {
                        "name": {"type": "string"},
                        "n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "n must not decrease"}]}}}},
                "atomic": {"type": "array",
                    "items": {"type": "object", "properties": {
                        "n": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "never evaluated"}]}}}},
            }}),
        ),
        true,
    )
    .unwrap()
}

fn err_text(r: Result<Value, Errors>) -> String {
    match r {
        Ok(v) => format!("accepted: {v}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn transition_rules_correlate_by_name_and_list_map_keys() {
    let v = pool_like();
    let mut old = obj(json!({"x": "a"}));
    // Create drops status; transition rules do not run without an old value.
    let stored = v.validate_create(&old).unwrap();
    old["status"] = json!({"gen": 5, "items": [{"name": "a", "n": 3}, {"name": "b", "n": 7}], "atomic": [{"n": 9}]});
    let stored = v.validate_status_update(&stored, &old).unwrap();
    assert_eq!(stored["status"]["gen"], 5);

    // Spec is immutable (object property correlation at `spec`).
    let mut new = stored.clone();
    new["spec"]["x"] = json!("b");
    assert_eq!(
        err_text(v.validate_update(&stored, &new)),
        r#"spec: Invalid value: "object": spec is immutable"#
    );

    // List-map items correlate by key, not index: reordering is fine, decreasing is not.
    let mut new = stored.clone();
    new["status"]["items"] =
        json!([{"name": "b", "n": 7}, {"name": "a", "n": 3}, {"name": "c", "n": 0}]);
    v.validate_status_update(&stored, &new).unwrap();
    new["status"]["items"] = json!([{"name": "b", "n": 6}, {"name": "a", "n": 3}]);
    assert_eq!(
        err_text(v.validate_status_update(&stored, &new)),
        r#"status.items[0].n: Invalid value: "integer": n must not decrease"#
    );
    // Atomic list items are not correlatable: the transition rule never runs there.
    let mut new = stored.clone();
    new["status"]["atomic"] = json!([{"n": 1}]);
    new["status"]["gen"] = json!(4);
    assert_eq!(
        err_text(v.validate_status_update(&stored, &new)),
        r#"status.gen: Invalid value: "integer": gen must not decrease"#
    );
}

#[test]
fn status_subresource_semantics() {
    let v = pool_like();
    let mut o = obj(json!({"x": "a"}));
    o["status"] = json!({"gen": 1});
    let stored = v.validate_create(&o).unwrap();
    assert!(stored.get("status").is_none(), "create drops status");
    let stored = v.validate_status_update(&stored, &o).unwrap();
    assert_eq!(stored["status"]["gen"], 1);
    // A main update keeps the old status whatever it sends.
    let mut new = stored.clone();
    new["status"]["gen"] = json!(100);
    let after = v.validate_update(&stored, &new).unwrap();
    assert_eq!(after["status"]["gen"], 1);
    // A status update keeps the old spec whatever it sends.
    let mut new = stored.clone();
    new["spec"]["x"] = json!("changed");
    new["status"]["gen"] = json!(2);
    let after = v.validate_status_update(&stored, &new).unwrap();
    assert_eq!(after["spec"]["x"], "a");
    assert_eq!(after["status"]["gen"], 2);
}

#[test]
fn status_update_paths_are_relative_to_status() {
    let v = Validator::new(
        &schema(
            json!({"type": "object"}),
            json!({"type": "object", "properties": {"s": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}}}}),
        ),
        true,
    )
    .unwrap();
    let stored = v.validate_create(&obj(json!({}))).unwrap();
    let mut new = stored.clone();
    new["status"] = json!({"s": {"name": ""}});
    assert_eq!(
        err_text(v.validate_status_update(&stored, &new)),
        r#"status.s.name: Invalid value: "": s.name in body should be at least 1 chars long"#
    );
}

#[test]
fn optional_old_self() {
    let mut root = schema(
        json!({"type": "object", "properties": {"pool": {"type": "string"}}}),
        json!({"type": "object"}),
    );
    root["x-kubernetes-validations"] = json!([{
        "rule": "self.metadata.name == self.spec.pool || oldSelf.hasValue() && oldSelf.spec.pool.value() == self.spec.pool",
        "message": "name must match pool",
        "optionalOldSelf": true
    }]);
    let v = Validator::new(&root, true).unwrap();
    // On create oldSelf is optional.none(): the name must match.
    assert_eq!(
        err_text(v.validate_create(&obj(json!({"pool": "other"})))),
        r#"<nil>: Invalid value: "object": name must match pool"#
    );
    let stored = v.validate_create(&obj(json!({"pool": "n"}))).unwrap();
    // A stored mismatch (e.g. from before the rule) may stay but not change to another.
    let mut mismatched = stored.clone();
    mismatched["spec"]["pool"] = json!("old");
    let mut new = mismatched.clone();
    new["metadata"]["labels"] = json!({"a": "b"});
    v.validate_update(&mismatched, &new).unwrap();
    new["spec"]["pool"] = json!("other");
    assert_eq!(
        err_text(v.validate_update(&mismatched, &new)),
        r#"<nil>: Invalid value: "object": name must match pool"#
    );
}

#[test]
fn ratcheting_tolerates_unchanged_invalid_values() {
    let v = Validator::new(
        &schema(
            json!({"type": "object", "properties": {
                "a": {"type": "string", "maxLength": 2},
                "b": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'bad'", "message": "bad b"}]},
                "c": {"type": "string"}}}),
            json!({"type": "object"}),
        ),
        true,
    )
    .unwrap();
    // Stored before the bounds existed.
    let stored = obj(json!({"a": "toolong", "b": "bad", "c": "1"}));
    let mut new = stored.clone();
    new["spec"]["c"] = json!("2");
    v.validate_update(&stored, &new).unwrap();
    new["spec"]["a"] = json!("stilltoolong");
    assert_eq!(
        err_text(v.validate_update(&stored, &new)),
        "[spec.a: Too long: may not be more than 2 bytes, <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"
    );
}

#[test]
fn pruning_defaulting_and_timestamps() {
    let v = Validator::new(
        &schema(
            json!({"type": "object", "properties": {
                "arch": {"type": "string", "default": "NoArch"},
                "start": {"type": "string", "format": "date-time"},
                "end": {"type": "string", "format": "date-time"}},
                "x-kubernetes-validations": [{"rule": "!has(self.end) || timestamp(self.start) < timestamp(self.end)", "message": "end must be after start"}]}),
            json!({"type": "object"}),
        ),
        true,
    )
    .unwrap();
    let stored = v
        .validate_create(&obj(json!({"unknown": 1, "start": "2024-01-01T00:00:00Z"})))
        .unwrap();
    assert_eq!(
        stored["spec"],
        json!({"arch": "NoArch", "start": "2024-01-01T00:00:00Z"})
    );
    assert_eq!(
        err_text(v.validate_create(&obj(
            json!({"start": "2024-01-02T00:00:00Z", "end": "2024-01-01T00:00:00Z"})
        ))),
        r#"spec: Invalid value: "object": end must be after start"#
    );
}

#[test]
fn unusable_schemas_are_reported() {
    let e = Validator::new(
        &json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.a ==", "message": "m"}]}),
        false,
    )
    .unwrap_err();
    assert!(e.path.contains("x-kubernetes-validations[0]"), "{e}");
    machineos_diagnostics::check_classified(
        &e,
        "InvalidSchema",
        machineos_diagnostics::Retry::Permanent,
    )
    .unwrap();
}

/// listtype's validateSet reports a repeated value once, at its second occurrence; and the
/// uniqueness checks are ratcheted: an update of an object whose stored lists already repeat
/// values is not refused for them.
#[test]
fn list_uniqueness_reported_once_and_ratcheted() {
    let v = Validator::new(
        &schema(
            json!({"type": "object", "properties": {
                "s": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "c": {"type": "string"}}}),
            json!({"type": "object"}),
        ),
        true,
    )
    .unwrap();
    assert_eq!(
        err_text(v.validate_create(&obj(json!({"s": ["a", "a", "a", "b", "b"]})))),
        r#"[spec.s[1]: Duplicate value: "a", spec.s[4]: Duplicate value: "b"]"#
    );
    let stored = obj(json!({"s": ["a", "a"], "c": "1"}));
    let mut new = stored.clone();
    new["spec"]["c"] = json!("2");
    v.validate_update(&stored, &new)
        .expect("the stored duplicates are tolerated");
}

/// `message` and a `messageExpression` result are trimmed (a YAML block scalar's newline).
#[test]
fn rule_messages_are_trimmed() {
    let rule = |extra: Value| {
        let mut r = json!({"rule": "self != 'x'"});
        for (k, v) in extra.as_object().expect("object") {
            r[k] = v.clone();
        }
        json!({"type": "object", "properties": {"a": {"type": "string", "x-kubernetes-validations": [r]}}})
    };
    assert_eq!(
        create_err(
            rule(json!({"message": "must not be x\n"})),
            json!({"a": "x"})
        ),
        r#"spec.a: Invalid value: "string": must not be x"#
    );
    assert_eq!(
        create_err(
            rule(json!({"messageExpression": "'got ' + self + '\\n'"})),
            json!({"a": "x"})
        ),
        r#"spec.a: Invalid value: "string": got x"#
    );
}

/// kube-openapi's `MultipleOf` divides with a relative tolerance: 0.3 is a multiple of 0.1.
#[test]
fn multiple_of_tolerates_float_error() {
    let s = json!({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.1}}});
    assert_eq!(
        create_err(s.clone(), json!({"n": 0.3})),
        "accepted: {\"apiVersion\":\"x/v1\",\"kind\":\"K\",\"metadata\":{\"name\":\"n\"},\"spec\":{\"n\":0.3}}"
    );
    assert!(create_err(s, json!({"n": 0.35})).contains("should be a multiple of 0.1"));
}
