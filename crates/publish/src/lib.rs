//! Derive a layered image from a base image and an Ignition config, and publish it by digest.
