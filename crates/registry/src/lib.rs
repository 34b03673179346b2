//! Registry and OCI-layout transport: pull manifests and blobs, push blobs and manifests, with retries and credentials.
