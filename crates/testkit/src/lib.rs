//! Test harness: real registries on loopback, a fault-injecting proxy, skopeo and umoci helpers.
