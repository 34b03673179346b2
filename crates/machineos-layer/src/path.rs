//! Absolute clean paths in an image (`/etc/passwd`): their parent and joining a name — the
//! one definition machineos uses (the planner, the base views, the base index).

/// The parent of an absolute clean path (`/` for top-level entries).
pub fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// The absolute path of `name` in the directory `dir`.
pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}
