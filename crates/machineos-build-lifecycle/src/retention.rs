//! Retention: which MachineOSBuilds, MachineOSImages and registry images of a pool to delete.
//!
//! The MCO has no retention policy (`docs/mco-behaviour.md` §2.7: builds accumulate, images go only when a
//! MachineOSBuild is deleted by hand); machineos adds one per MachineOSConfig, set by two
//! annotations ([`crate::vocab::RETAIN_SUCCEEDED_ANNOTATION`],
//! [`crate::vocab::RETAIN_FAILED_SECONDS_ANNOTATION`]): keep the newest N Succeeded builds
//! (default 5) and Failed/Interrupted builds for a duration after they ended (default one
//! day).
//!
//! Never deleted, whatever the policy says: the build for the pool's current inputs, any
//! unfinished build, the build the MachineOSConfig's status points to, and any build whose
//! image's digest something uses ([`crate::Observed::images_in_use`]: nodes' current and
//! desired images, pools, MachineImages — MCO OCPBUGS-59197), or the legacy pool annotation
//! names. A registry image is deleted only when no kept build or MachineOSImage of any pool
//! shares its digest (two builds can share one image when it was reused). Digests are
//! compared without the repository, so a reference through a mirror still protects it.

use std::collections::BTreeSet;

use crate::action::{Action, EventType, ObjectRef};
use crate::config::{Effective, PoolContext, context};
use crate::observed::{BuildObserved, Observed, OptIn, PoolObserved, Timestamp};
use crate::vocab;

/// The digest part of `repo@sha256:…` (the whole string when it has none).
pub fn digest_of(image: &str) -> &str {
    image.rsplit_once('@').map_or(image, |(_, d)| d)
}

/// The names of the builds whose image is `image` (compared by digest).
fn builds_with_image<'a>(builds: &'a [BuildObserved], image: &str) -> Vec<&'a str> {
    let d = digest_of(image);
    builds
        .iter()
        .filter(|b| b.digested_image.as_deref().map(digest_of) == Some(d))
        .map(|b| b.name.as_str())
        .collect()
}

/// Retention for every valid, opted-in pool (what [`crate::decide()`] appends).
pub fn retention(observed: &Observed, now: Timestamp) -> Vec<Action> {
    let mut out = Vec::new();
    for p in &observed.pools {
        match context(observed, p) {
            PoolContext::Ready { eff, target, .. } => {
                out.extend(for_pool(observed, p, &eff, Some(&target), now))
            }
            PoolContext::Waiting(eff, _) => out.extend(for_pool(observed, p, &eff, None, now)),
            PoolContext::NotOptedIn | PoolContext::Invalid(_) => {}
        }
    }
    out
}

/// Retention for one pool; `target` is the build for its current inputs, if known.
pub fn for_pool(
    observed: &Observed,
    p: &PoolObserved,
    eff: &Effective,
    target: Option<&String>,
    now: Timestamp,
) -> Vec<Action> {
    let policy = eff.retention;
    let in_use: BTreeSet<&str> = observed
        .images_in_use
        .iter()
        .map(|i| digest_of(i))
        .collect();
    let mut protected: BTreeSet<&str> = BTreeSet::new();
    let builds_with_image = |image: &str| builds_with_image(&p.builds, image);
    match &p.opt_in {
        Some(OptIn::MachineOSConfig(m)) => {
            protected.extend(m.current_build.as_deref());
            if let Some(i) = &m.current_image_pull_spec {
                protected.extend(builds_with_image(i));
            }
        }
        _ => {
            if let Some(i) = p
                .pool
                .annotations
                .get(vocab::NEWEST_IMAGE_EQUIVALENT_CONFIG_ANNOTATION)
            {
                protected.extend(builds_with_image(i));
            }
        }
    }
    protected.extend(target.map(String::as_str));

    let mut succeeded: Vec<_> = p
        .builds
        .iter()
        .filter(|b| b.phase == crate::Phase::Succeeded)
        .collect();
    succeeded.sort_by(|a, b| {
        (b.build_end.unwrap_or(b.created), b.created, &b.name).cmp(&(
            a.build_end.unwrap_or(a.created),
            a.created,
            &a.name,
        ))
    });
    let mut doomed: Vec<&crate::BuildObserved> = Vec::new();
    for b in succeeded.iter().skip(policy.keep_succeeded) {
        doomed.push(b);
    }
    for b in &p.builds {
        if matches!(b.phase, crate::Phase::Failed | crate::Phase::Interrupted)
            && now - b.build_end.unwrap_or(b.created) > policy.keep_failed_seconds
        {
            doomed.push(b);
        }
    }
    doomed.retain(|b| {
        b.phase.is_terminal()
            && !protected.contains(b.name.as_str())
            && !b
                .digested_image
                .as_deref()
                .is_some_and(|d| in_use.contains(digest_of(d)))
    });
    doomed.sort_by(|a, b| a.name.cmp(&b.name));
    doomed.dedup_by(|a, b| a.name == b.name);
    let doomed_names: BTreeSet<&str> = doomed.iter().map(|b| b.name.as_str()).collect();

    // Digests something kept still needs: every other build of every pool, every
    // MachineOSImage not going with a doomed build, everything in use.
    let mut needed: BTreeSet<&str> = in_use.clone();
    for q in &observed.pools {
        for b in &q.builds {
            if !(q.pool.name == p.pool.name && doomed_names.contains(b.name.as_str())) {
                needed.extend(b.digested_image.as_deref().map(digest_of));
            }
        }
    }
    let image_goes = |i: &crate::MachineOSImageObserved| {
        i.pool == p.pool.name
            && (doomed_names.contains(i.name.as_str())
                || i.build.as_deref().is_some_and(|b| doomed_names.contains(b)))
    };
    for i in &observed.machine_os_images {
        if !image_goes(i) {
            needed.insert(digest_of(&i.image));
        }
    }

    let mut out = Vec::new();
    let mut deleted_digests = BTreeSet::new();
    for b in doomed {
        if let Some(d) = &b.digested_image
            && !needed.contains(digest_of(d))
            && deleted_digests.insert(digest_of(d).to_owned())
        {
            out.push(Action::DeleteRegistryImage {
                image: d.clone(),
                push_secret: Some(eff.push_secret.clone()),
            });
        }
        for i in observed
            .machine_os_images
            .iter()
            .filter(|i| image_goes(i) && (i.name == b.name || i.build.as_deref() == Some(&b.name)))
        {
            out.push(Action::DeleteMachineOSImage {
                name: i.name.clone(),
            });
        }
        out.push(Action::DeleteBuild {
            build: b.name.clone(),
        });
        out.push(Action::Event {
            object: ObjectRef::cluster("MachineOSBuild", &b.name),
            type_: EventType::Normal,
            reason: vocab::event::BUILD_DELETED.to_owned(),
            message: format!(
                "MachineOSBuild {} deleted by the retention policy of {}",
                b.name, eff.machine_os_config
            ),
        });
    }
    out
}
