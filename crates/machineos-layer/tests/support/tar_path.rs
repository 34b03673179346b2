//! Tar member paths as the layer checks see them: normalised, and refused when they are
//! absolute or unclean. Shared by the differential extractor and the property tests.

/// Normalise a tar path: strip `./` and a trailing `/`, reject absolute paths, `..`, empty
/// components and `.` components.
pub fn clean_tar_path(raw: &str) -> Result<String, String> {
    let mut s = raw;
    while let Some(rest) = s.strip_prefix("./") {
        s = rest;
    }
    if s == "." {
        s = "";
    }
    let s = s.strip_suffix('/').unwrap_or(s);
    if s.is_empty() {
        return Ok(String::new());
    }
    if s.starts_with('/') {
        return Err(format!("tar path {raw:?} is absolute"));
    }
    for c in s.split('/') {
        if c.is_empty() || c == "." || c == ".." {
            return Err(format!("tar path {raw:?} is not clean"));
        }
    }
    Ok(s.to_string())
}
