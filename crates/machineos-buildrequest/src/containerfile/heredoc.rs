//! RUN heredocs lowered to the exec form, so buildah versions without heredoc support run
//! machineos's Containerfile.
//!
//! The Containerfile [`super::render`] gives runs its
//! extensions step as `RUN --mount=… bash <<'EOF'` + body + `EOF`. buildah parses heredocs
//! only since 1.35; Debian 12's is 1.28 and reads the body's lines as instructions. [`lower`]
//! rewrites each RUN with heredocs into the exec form of what BuildKit itself runs:
//!
//! * the command does not start with the heredoc (`RUN bash <<'EOF'`): BuildKit hands the
//!   shell the command line, a newline and each heredoc (body lines and terminator line, as
//!   written). So does the lowered form: `RUN <flags> ["/bin/sh", "-c", "bash <<'EOF'\n…\nEOF\n"]`,
//!   the shell doing the heredoc's quoting, expansion and `<<-` tab stripping.
//! * the command is one heredoc (`RUN <<EOF`): BuildKit runs the body as a script with the
//!   shell; lowered to `[shell…, body]`. A body starting with `#!` (which BuildKit runs
//!   with that interpreter) is refused.
//!
//! The shell is the stage's: `["/bin/sh", "-c"]`, or the last `SHELL` of the stage or of the
//! stage it starts `FROM`. Flags (`--mount=…`, `--network=…`) are kept verbatim. Every
//! other line is kept as it is, so line numbers change only where a heredoc was lowered;
//! errors carry the line numbers of the input.
//!
//! COPY and ADD heredocs (which would need build-context files) are refused with their line.
//! Lowering is applied whatever the buildah version: one code path, the one tested.
//!
//! Every builder lowers what it builds: the CLI's local buildah, the Job (whose image may be
//! any buildah) and the OpenShift Build (whose builder vendors its own).
//!
//! The text is the validated output of `render` ([`super::validate`] passed), so the parsing
//! here is that validator's (`\` continuations, comment
//! and blank lines inside them skipped, heredoc words `<<[-]NAME` / `<<[-]'NAME'` /
//! `<<[-]"NAME"` among blank-separated words outside quotes, the `escape` directive never
//! set) and assumes the input is well-formed; hand-written because no crate parses
//! Containerfile heredocs (see [`super`]).

use std::fmt;

use super::validate::{heredocs, words};

/// The shell of a stage without `SHELL`.
const DEFAULT_SHELL: [&str; 2] = ["/bin/sh", "-c"];

/// Why a Containerfile cannot be lowered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowerError {
    /// The 1-based line where the instruction starts.
    pub line: usize,
    /// That line.
    pub text: String,
    /// What is not supported.
    pub message: String,
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {} ({:?})", self.line, self.message, self.text)
    }
}

impl std::error::Error for LowerError {}

impl machineos_diagnostics::Classify for LowerError {
    fn reason(&self) -> &'static str {
        "InvalidContainerfile"
    }
    fn retry(&self) -> machineos_diagnostics::Retry {
        machineos_diagnostics::Retry::Permanent
    }
}

/// `text` with each RUN heredoc lowered; the count of RUN instructions lowered.
pub fn lower(text: &str) -> Result<(String, usize), LowerError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    // Stage names (lower case) and their shells; the current stage's shell.
    let mut stages: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let mut shell: Vec<String> = DEFAULT_SHELL.iter().map(|s| s.to_string()).collect();
    let mut lowered = 0;
    let mut i = 0;
    while i < lines.len() {
        let first = lines[i].trim();
        if first.is_empty() || first.starts_with('#') {
            out.push(lines[i].to_owned());
            i += 1;
            continue;
        }
        let start = i;
        let error = |message: String| LowerError {
            line: start + 1,
            text: lines[start].to_owned(),
            message,
        };
        // The logical line, continuations joined as BuildKit joins them (escape and newline
        // removed), comment and blank lines inside skipped.
        let mut logical = String::new();
        loop {
            let trimmed = lines[i].trim_end();
            i += 1;
            match trimmed.strip_suffix('\\') {
                Some(body) => {
                    logical.push_str(body);
                    while i < lines.len() && {
                        let t = lines[i].trim();
                        t.is_empty() || t.starts_with('#')
                    } {
                        i += 1;
                    }
                    if i >= lines.len() {
                        break;
                    }
                }
                None => {
                    logical.push_str(trimmed);
                    break;
                }
            }
        }
        let (keyword, args) = split_first_word(logical.trim());
        let instruction = keyword.to_ascii_uppercase();
        let docs = if matches!(instruction.as_str(), "RUN" | "COPY" | "ADD") {
            heredocs(args)
        } else {
            Vec::new()
        };
        // The bodies: each up to its terminator line.
        let mut bodies: Vec<(Vec<&str>, &str)> = Vec::new();
        for (strip_tabs, name) in &docs {
            let mut body = Vec::new();
            loop {
                let Some(line) = lines.get(i) else {
                    return Err(error(format!("heredoc {name} is not terminated")));
                };
                i += 1;
                let candidate = if *strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if candidate == name {
                    bodies.push((body, line));
                    break;
                }
                body.push(*line);
            }
        }
        match instruction.as_str() {
            "FROM" => {
                let words = words(args);
                let plain: Vec<&String> = words.iter().filter(|w| !w.starts_with("--")).collect();
                let image = plain.first().map(|w| w.to_ascii_lowercase());
                let name = match plain.as_slice() {
                    [_, r#as, name] if r#as.eq_ignore_ascii_case("as") => {
                        Some(name.to_ascii_lowercase())
                    }
                    _ => None,
                };
                shell = stages
                    .iter()
                    .rev()
                    .find(|(n, _)| n.is_some() && *n == image)
                    .map(|(_, s)| s.clone())
                    .unwrap_or_else(|| DEFAULT_SHELL.iter().map(|s| s.to_string()).collect());
                stages.push((name, shell.clone()));
            }
            "SHELL" => {
                shell = serde_json::from_str::<Vec<String>>(args)
                    .map_err(|e| error(format!("SHELL is not a JSON array of strings: {e}")))?;
                if let Some(last) = stages.last_mut() {
                    last.1 = shell.clone();
                }
            }
            _ => {}
        }
        if docs.is_empty() {
            out.extend(lines[start..i].iter().map(|l| l.to_string()));
            continue;
        }
        if instruction != "RUN" {
            return Err(error(format!(
                "{instruction} with a heredoc is not supported by machineos build's local buildah step (RUN heredocs are)"
            )));
        }
        let (flags, command) = take_flags(args);
        let command_words = words(command);
        let script_mode = docs.len() == 1
            && matches!(command_words.as_slice(), [only] if !heredocs(only).is_empty());
        let mut argv = shell.clone();
        if script_mode {
            let (body, _) = &bodies[0];
            if body.first().is_some_and(|l| l.starts_with("#!")) {
                return Err(error(
                    "a RUN heredoc script with a #! line is not supported by machineos build's local buildah step".to_owned(),
                ));
            }
            let mut script = body.join("\n");
            script.push('\n');
            argv.push(script);
        } else {
            let mut script = command.to_owned();
            for (body, terminator) in &bodies {
                script.push('\n');
                for l in body {
                    script.push_str(l);
                    script.push('\n');
                }
                script.push_str(terminator);
            }
            script.push('\n');
            argv.push(script);
        }
        let json = serde_json::to_string(&argv)
            .map_err(|e| error(format!("encoding the exec form: {e}")))?;
        let mut lowered_line = keyword.to_owned();
        for f in flags {
            lowered_line.push(' ');
            lowered_line.push_str(f);
        }
        lowered_line.push(' ');
        lowered_line.push_str(&json);
        out.push(lowered_line);
        // Comment lines inside the instruction's continuation go with it.
        lowered += 1;
    }
    let mut text = out.join("\n");
    text.push('\n');
    Ok((text, lowered))
}

fn split_first_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(at) => (&s[..at], s[at..].trim_start()),
        None => (s, ""),
    }
}

/// Leading `--flag[=value]` words and the rest of the arguments (its spacing kept).
fn take_flags(args: &str) -> (Vec<&str>, &str) {
    let mut flags = Vec::new();
    let mut rest = args.trim_start();
    while rest.starts_with("--") {
        let (word, tail) = split_first_word(rest);
        flags.push(word);
        rest = tail;
    }
    (flags, rest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowering_table() {
        let sh = |s: &str| serde_json::to_string(&["/bin/sh", "-c", s]).unwrap();
        let cases: Vec<(&str, String, usize)> = vec![
            // Nothing to lower: verbatim.
            (
                "FROM a AS b\n# c\n\nRUN echo \\\n  hi\n",
                "FROM a AS b\n# c\n\nRUN echo \\\n  hi\n".to_owned(),
                0,
            ),
            // The template's shape: flags kept, continuation joined as BuildKit joins it.
            (
                "FROM x AS configs\nRUN --mount=type=bind,from=e,target=/t,z \\\n    bash <<'EOF'\nset -e\n\techo \"$HOME\"\nEOF\nRUN ostree container commit\n",
                format!(
                    "FROM x AS configs\nRUN --mount=type=bind,from=e,target=/t,z {}\nRUN ostree container commit\n",
                    sh("bash <<'EOF'\nset -e\n\techo \"$HOME\"\nEOF\n")
                ),
                1,
            ),
            // Two heredocs, <<- keeps its tabs for the shell to strip.
            (
                "FROM x\nRUN cat <<-A >/a && cat <<B >/b\n\tone\n\tA\ntwo\nB\n",
                format!(
                    "FROM x\nRUN {}\n",
                    sh("cat <<-A >/a && cat <<B >/b\n\tone\n\tA\ntwo\nB\n")
                ),
                1,
            ),
            // A heredoc script: the body is the script.
            (
                "FROM x\nRUN <<EOF\necho a\necho b\nEOF\n",
                format!("FROM x\nRUN {}\n", sh("echo a\necho b\n")),
                1,
            ),
            // The stage's SHELL, inherited by a stage FROM it, not by another.
            (
                "FROM x AS one\nSHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\nFROM one AS two\nRUN <<E\ntrue\nE\nFROM y\nRUN <<E\ntrue\nE\n",
                format!(
                    "FROM x AS one\nSHELL [\"/bin/bash\", \"-o\", \"pipefail\", \"-c\"]\nFROM one AS two\nRUN {}\nFROM y\nRUN {}\n",
                    serde_json::to_string(&["/bin/bash", "-o", "pipefail", "-c", "true\n"])
                        .unwrap(),
                    sh("true\n")
                ),
                2,
            ),
            // A here-string and a quoted marker are not heredocs.
            (
                "FROM x\nRUN cat <<<hi && echo '<<EOF'\n",
                "FROM x\nRUN cat <<<hi && echo '<<EOF'\n".to_owned(),
                0,
            ),
        ];
        for (input, want, count) in cases {
            let (got, n) = lower(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(got, want, "{input:?}");
            assert_eq!(n, count, "{input:?}");
        }
    }

    #[test]
    fn unsupported_heredocs_are_refused_with_their_line() {
        let cases = [
            (
                "FROM x\n\nCOPY <<EOF /etc/x\nhi\nEOF\n",
                3,
                "COPY with a heredoc",
            ),
            (
                "FROM x\nRUN <<EOF\n#!/usr/bin/python3\nprint(1)\nEOF\n",
                2,
                "#!",
            ),
            ("FROM x\nRUN cat <<EOF\nno end\n", 2, "not terminated"),
        ];
        for (input, line, what) in cases {
            let e = lower(input).unwrap_err();
            assert_eq!(e.line, line, "{input:?}: {e}");
            assert!(e.to_string().contains(what), "{input:?}: {e}");
        }
    }
}
