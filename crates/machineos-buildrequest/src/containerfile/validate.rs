//! Containerfile validation, before any build starts: BuildKit's syntax rules for the
//! instructions a Containerfile may use (see [`validate`]), with the 1-based line of the
//! first error and its text. Written by hand: the one Dockerfile parser crate
//! (`dockerfile-parser` 0.9) parses neither heredocs nor the `escape` directive.

use machineos_diagnostics::{Classify, Retry};

/// The stage the rendered Containerfile's first build stage is named, which the user's
/// Containerfile continues from (`FROM configs AS final`).
pub const CONFIGS_STAGE: &str = "configs";

/// A Containerfile syntax error: where, and what.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {kind}: {text:?}")]
pub struct ContainerfileError {
    /// 1-based line number where the instruction (or directive) starts; for an error about
    /// the whole file (no FROM), its last line.
    pub line: usize,
    /// That line, as written.
    pub text: String,
    /// What is wrong.
    pub kind: ContainerfileErrorKind,
}

impl Classify for ContainerfileError {
    /// `InvalidContainerfile`.
    fn reason(&self) -> &'static str {
        "InvalidContainerfile"
    }

    /// Always permanent: the Containerfile must change.
    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// What is wrong with a Containerfile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ContainerfileErrorKind {
    /// An instruction BuildKit and buildah do not know.
    #[error("unknown instruction {0}")]
    UnknownInstruction(String),
    /// An instruction without arguments.
    #[error("{0} requires arguments")]
    EmptyArguments(String),
    /// An instruction other than ARG before the first FROM.
    #[error("{0} before the first FROM (only ARG may come before it)")]
    BeforeFrom(String),
    /// No FROM at all.
    #[error("no FROM instruction")]
    NoFrom,
    /// Arguments of the wrong shape.
    #[error("{instruction}: {message}")]
    InvalidArguments {
        /// The instruction.
        instruction: String,
        /// What is expected.
        message: String,
    },
    /// A stage name BuildKit refuses.
    #[error("invalid stage name {0:?} (expected [a-z][a-z0-9-_.]*)")]
    InvalidStageName(String),
    /// A stage name used twice.
    #[error("duplicate stage name {0:?}")]
    DuplicateStageName(String),
    /// A flag the instruction does not take.
    #[error("{instruction} does not take the flag --{flag}")]
    UnknownFlag {
        /// The instruction.
        instruction: String,
        /// The flag, without `--`.
        flag: String,
    },
    /// A flag with a malformed value.
    #[error("--{flag}: {message}")]
    InvalidFlag {
        /// The flag, without `--`.
        flag: String,
        /// What is wrong.
        message: String,
    },
    /// A `FROM`, `--from` or `--mount from=` that is neither an earlier stage nor an image.
    #[error("{0:?} is neither an earlier stage nor a valid image reference")]
    UnknownStageOrImage(String),
    /// A stage that refers to itself.
    #[error("stage {0:?} refers to itself")]
    SelfReference(String),
    /// A heredoc without its terminator line.
    #[error("heredoc {0} is not terminated")]
    UnterminatedHeredoc(String),
    /// A line continuation with no line after it.
    #[error("line continuation at the end of the file")]
    ContinuationAtEnd,
    /// A parser directive given twice, or with an invalid value.
    #[error("parser directive {name}: {message}")]
    InvalidDirective {
        /// The directive.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A user Containerfile that does not continue from the `configs` stage.
    #[error("the Containerfile must continue from the configs stage with FROM configs AS final")]
    MissingFromConfigs,
}

const INSTRUCTIONS: [&str; 18] = [
    "FROM",
    "RUN",
    "COPY",
    "ADD",
    "ENV",
    "ARG",
    "LABEL",
    "WORKDIR",
    "USER",
    "EXPOSE",
    "VOLUME",
    "ENTRYPOINT",
    "CMD",
    "SHELL",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "ONBUILD",
    "MAINTAINER",
];

fn flags_of(instruction: &str) -> &'static [&'static str] {
    match instruction {
        "FROM" => &["platform"],
        "RUN" => &["mount", "network", "security"],
        "COPY" => &["from", "chown", "chmod", "link", "parents", "exclude"],
        "ADD" => &[
            "chown",
            "chmod",
            "link",
            "keep-git-dir",
            "checksum",
            "exclude",
            "unpack",
        ],
        "HEALTHCHECK" => &[
            "interval",
            "timeout",
            "start-period",
            "start-interval",
            "retries",
        ],
        _ => &[],
    }
}

/// Flags that may be given without a value.
const BOOLEAN_FLAGS: [&str; 4] = ["link", "parents", "keep-git-dir", "unpack"];

/// Check the syntax of a Containerfile (see the module documentation for the rules).
pub fn validate(text: &str) -> Result<(), ContainerfileError> {
    check(text, &[]).map(|_| ())
}

/// Validate a user's Containerfile, which continues from the stage `configs`.
pub(super) fn validate_user(text: &str) -> Result<(), ContainerfileError> {
    let summary = check(text, &[CONFIGS_STAGE])?;
    if let Some(line) = summary.escape_directive {
        return Err(ContainerfileError {
            line,
            text: line_text(text, line),
            kind: ContainerfileErrorKind::InvalidDirective {
                name: "escape".to_owned(),
                message: "not allowed in a MachineOSConfig's Containerfile, which is appended to \
                          the rendered one where it would be a comment"
                    .to_owned(),
            },
        });
    }
    if summary.from_images.iter().any(|(_, i)| i == CONFIGS_STAGE) {
        return Ok(());
    }
    let line = summary.from_images.first().map_or(1, |(l, _)| *l);
    Err(ContainerfileError {
        line,
        text: line_text(text, line),
        kind: ContainerfileErrorKind::MissingFromConfigs,
    })
}

pub(super) fn only_comments(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#')
    })
}

fn line_text(text: &str, line: usize) -> String {
    text.lines()
        .nth(line.saturating_sub(1))
        .unwrap_or("")
        .trim_end_matches('\r')
        .to_owned()
}

/// What [`check`] learns besides errors.
struct Summary {
    /// Each FROM's line and image, lowercased.
    from_images: Vec<(usize, String)>,
    /// The line of an `escape` directive.
    escape_directive: Option<usize>,
}

/// The build stages seen so far.
struct Stages {
    /// Names of the stages before the file (known, as if defined earlier).
    predefined: Vec<String>,
    /// The file's stages, lowercased names.
    names: Vec<Option<String>>,
}

impl Stages {
    fn defined(&self, name: &str) -> bool {
        self.predefined.iter().any(|n| n == name) || self.names.iter().flatten().any(|n| n == name)
    }
}

fn check(text: &str, predefined: &[&str]) -> Result<Summary, ContainerfileError> {
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let err = |line: usize, kind| ContainerfileError {
        line: line + 1,
        text: lines.get(line).copied().unwrap_or("").to_owned(),
        kind,
    };

    // Parser directives, at the top only.
    let mut escape = '\\';
    let mut escape_directive = None;
    let mut seen_directives: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some((name, value)) = lines.get(i).and_then(|l| directive(l)) {
        if seen_directives.contains(&name) {
            return Err(err(
                i,
                ContainerfileErrorKind::InvalidDirective {
                    name,
                    message: "given more than once".to_owned(),
                },
            ));
        }
        if name == "escape" {
            escape = match value.as_str() {
                "\\" => '\\',
                "`" => '`',
                _ => {
                    return Err(err(
                        i,
                        ContainerfileErrorKind::InvalidDirective {
                            name,
                            message: format!("invalid escape token {value:?} (\\ or `)"),
                        },
                    ));
                }
            };
            escape_directive = Some(i + 1);
        }
        seen_directives.push(name);
        i += 1;
    }

    let mut stages = Stages {
        predefined: predefined.iter().map(|s| s.to_ascii_lowercase()).collect(),
        names: Vec::new(),
    };
    let mut from_images = Vec::new();
    while i < lines.len() {
        let first = lines[i].trim();
        if first.is_empty() || first.starts_with('#') {
            i += 1;
            continue;
        }
        let start = i;
        // The logical line: continuations joined, comment and blank lines inside skipped.
        let mut logical = String::new();
        let mut current = lines[i];
        loop {
            let trimmed = current.trim_end();
            match trimmed.strip_suffix(escape) {
                Some(body) => {
                    logical.push_str(body);
                    logical.push(' ');
                    i += 1;
                    while i < lines.len() && {
                        let t = lines[i].trim();
                        t.is_empty() || t.starts_with('#')
                    } {
                        i += 1;
                    }
                    match lines.get(i) {
                        Some(next) => current = next,
                        None => return Err(err(start, ContainerfileErrorKind::ContinuationAtEnd)),
                    }
                }
                None => {
                    logical.push_str(trimmed);
                    i += 1;
                    break;
                }
            }
        }
        let logical = logical.trim();
        let (keyword, args) = split_first_word(logical);
        let instruction = keyword.to_ascii_uppercase();
        if !INSTRUCTIONS.contains(&instruction.as_str()) {
            return Err(err(
                start,
                ContainerfileErrorKind::UnknownInstruction(keyword.to_owned()),
            ));
        }

        // Heredoc bodies follow the instruction's last line.
        if matches!(instruction.as_str(), "RUN" | "COPY" | "ADD") {
            for (strip_tabs, name) in heredocs(args) {
                loop {
                    let Some(line) = lines.get(i) else {
                        return Err(err(
                            start,
                            ContainerfileErrorKind::UnterminatedHeredoc(name),
                        ));
                    };
                    i += 1;
                    let candidate = if strip_tabs {
                        line.trim_start_matches('\t')
                    } else {
                        line
                    };
                    if candidate == name {
                        break;
                    }
                }
            }
        }

        if args.is_empty() {
            return Err(err(
                start,
                ContainerfileErrorKind::EmptyArguments(instruction),
            ));
        }
        if stages.names.is_empty() && instruction != "FROM" && instruction != "ARG" {
            return Err(err(start, ContainerfileErrorKind::BeforeFrom(instruction)));
        }
        check_instruction(&instruction, args, &mut stages, &mut from_images, start)
            .map_err(|kind| err(start, kind))?;
    }
    if stages.names.is_empty() {
        let last = lines
            .iter()
            .rposition(|l| !l.trim().is_empty())
            .unwrap_or(0);
        return Err(err(last, ContainerfileErrorKind::NoFrom));
    }
    Ok(Summary {
        from_images,
        escape_directive,
    })
}

/// A parser directive line: `# name=value`, `name` one BuildKit knows.
fn directive(line: &str) -> Option<(String, String)> {
    let rest = line.trim().strip_prefix('#')?;
    let (name, value) = rest.split_once('=')?;
    let name = name.trim().to_ascii_lowercase();
    matches!(name.as_str(), "syntax" | "escape" | "check").then(|| (name, value.trim().to_owned()))
}

fn split_first_word(s: &str) -> (&str, &str) {
    let s = s.trim_start();
    match s.find(char::is_whitespace) {
        Some(at) => (&s[..at], s[at..].trim()),
        None => (s, ""),
    }
}

/// Words split on blanks outside quotes; quotes are kept.
pub(super) fn words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            word.push(c);
            escaped = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') if quote != Some('\'') => {
                word.push(c);
                escaped = true;
            }
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            (None, '"' | '\'') => {
                quote = Some(c);
                word.push(c);
            }
            (Some(q), c) if c == q => {
                quote = None;
                word.push(c);
            }
            _ => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The heredocs a RUN, COPY or ADD opens, in order: whether `<<-` (leading tabs stripped
/// from the terminator line), and the terminator.
pub(super) fn heredocs(args: &str) -> Vec<(bool, String)> {
    words(args)
        .into_iter()
        .filter_map(|w| {
            let rest = w.trim_start_matches(|c: char| c.is_ascii_digit());
            let rest = rest.strip_prefix("<<")?;
            if rest.starts_with('<') {
                return None; // a here-string
            }
            let (strip, rest) = match rest.strip_prefix('-') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            let name = ['\'', '"']
                .iter()
                .find_map(|q| rest.strip_prefix(*q).and_then(|r| r.strip_suffix(*q)))
                .unwrap_or(rest);
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.');
            ok.then(|| (strip, name.to_owned()))
        })
        .collect()
}

/// Leading `--name[=value]` flags and the rest.
fn take_flags(args: &str) -> (Vec<(String, Option<String>)>, &str) {
    let mut flags = Vec::new();
    let mut rest = args.trim_start();
    while let Some(after) = rest.strip_prefix("--") {
        let (word, tail) = split_first_word(after);
        let (name, value) = match word.split_once('=') {
            Some((n, v)) => (n.to_ascii_lowercase(), Some(unquote(v).to_owned())),
            None => (word.to_ascii_lowercase(), None),
        };
        flags.push((name, value));
        rest = tail;
    }
    (flags, rest)
}

fn unquote(s: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// The JSON (exec) form of the arguments, when they are one.
fn json_form(args: &str) -> Option<Vec<String>> {
    if args.starts_with('[') {
        serde_json::from_str(args).ok()
    } else {
        None
    }
}

fn invalid(instruction: &str, message: impl Into<String>) -> ContainerfileErrorKind {
    ContainerfileErrorKind::InvalidArguments {
        instruction: instruction.to_owned(),
        message: message.into(),
    }
}

fn check_instruction(
    instruction: &str,
    args: &str,
    stages: &mut Stages,
    from_images: &mut Vec<(usize, String)>,
    line: usize,
) -> Result<(), ContainerfileErrorKind> {
    let (flags, rest) = take_flags(args);
    let known = flags_of(instruction);
    for (name, value) in &flags {
        if !known.contains(&name.as_str()) {
            return Err(ContainerfileErrorKind::UnknownFlag {
                instruction: instruction.to_owned(),
                flag: name.clone(),
            });
        }
        if value.as_deref().is_none_or(str::is_empty) && !BOOLEAN_FLAGS.contains(&name.as_str()) {
            return Err(ContainerfileErrorKind::InvalidFlag {
                flag: name.clone(),
                message: "requires a value".to_owned(),
            });
        }
    }
    let flag = |n: &'static str| {
        flags
            .iter()
            .filter(move |(name, _)| name == n)
            .filter_map(|(_, v)| v.as_deref())
    };
    if rest.is_empty() {
        return Err(ContainerfileErrorKind::EmptyArguments(
            instruction.to_owned(),
        ));
    }
    let ws = words(rest);
    match instruction {
        "FROM" => {
            let (image, name) = match ws.as_slice() {
                [image] => (image, None),
                [image, as_, name] if as_.eq_ignore_ascii_case("as") => (image, Some(name)),
                _ => return Err(invalid("FROM", "expected FROM <image> [AS <name>]")),
            };
            check_reference(image, stages, false)?;
            from_images.push((line + 1, image.to_ascii_lowercase()));
            let name = match name {
                Some(n) => {
                    let lower = n.to_ascii_lowercase();
                    if !is_stage_name(&lower) {
                        return Err(ContainerfileErrorKind::InvalidStageName(n.clone()));
                    }
                    if stages.defined(&lower) {
                        return Err(ContainerfileErrorKind::DuplicateStageName(n.clone()));
                    }
                    Some(lower)
                }
                None => None,
            };
            stages.names.push(name);
        }
        "RUN" => {
            if json_form(rest).is_some_and(|v| v.is_empty()) {
                return Err(ContainerfileErrorKind::EmptyArguments("RUN".to_owned()));
            }
            for mount in flag("mount") {
                check_mount(mount, stages)?;
            }
        }
        "COPY" | "ADD" => {
            let count = json_form(rest).map_or(ws.len(), |v| v.len());
            if count < 2 {
                return Err(invalid(
                    instruction,
                    "expected at least a source and a destination",
                ));
            }
            for from in flag("from") {
                check_reference(from, stages, true)?;
            }
        }
        "ENV" | "LABEL" => {
            if ws.first().is_some_and(|w| w.contains('=')) {
                if let Some(bad) = ws.iter().find(|w| !w.contains('=') || w.starts_with('=')) {
                    return Err(invalid(
                        instruction,
                        format!("expected key=value pairs, got {bad:?}"),
                    ));
                }
            } else if ws.len() < 2 {
                return Err(invalid(
                    instruction,
                    "expected key=value pairs (or the legacy form: key value)",
                ));
            }
        }
        "ARG" => {
            if let Some(bad) = ws.iter().find(|w| w.starts_with('=')) {
                return Err(invalid("ARG", format!("a name is missing in {bad:?}")));
            }
        }
        "EXPOSE" => {
            if let Some(bad) = ws.iter().find(|w| !w.contains('$') && !is_port(w)) {
                return Err(invalid(
                    "EXPOSE",
                    format!("invalid port {bad:?} (port[-port][/tcp|udp|sctp])"),
                ));
            }
        }
        "USER" | "STOPSIGNAL" if ws.len() != 1 => {
            return Err(invalid(instruction, "expected one value"));
        }
        "SHELL" => match json_form(rest) {
            Some(v) if !v.is_empty() => {}
            _ => {
                return Err(invalid(
                    "SHELL",
                    "expected a JSON array of strings, such as [\"/bin/sh\", \"-c\"]",
                ));
            }
        },
        "HEALTHCHECK" => {
            let (kind, command) = split_first_word(rest);
            let ok = if kind.eq_ignore_ascii_case("none") {
                command.is_empty() && flags.is_empty()
            } else {
                kind.eq_ignore_ascii_case("cmd") && !command.is_empty()
            };
            if !ok {
                return Err(invalid("HEALTHCHECK", "expected NONE or CMD <command>"));
            }
        }
        "ONBUILD" => {
            let (sub, sub_args) = split_first_word(rest);
            let sub = sub.to_ascii_uppercase();
            if !INSTRUCTIONS.contains(&sub.as_str()) {
                return Err(ContainerfileErrorKind::UnknownInstruction(sub));
            }
            if matches!(sub.as_str(), "ONBUILD" | "FROM" | "MAINTAINER") {
                return Err(invalid(
                    "ONBUILD",
                    format!("{sub} is not allowed in ONBUILD"),
                ));
            }
            if sub_args.is_empty() {
                return Err(ContainerfileErrorKind::EmptyArguments(sub));
            }
        }
        // WORKDIR, VOLUME, ENTRYPOINT, CMD, MAINTAINER: any non-empty arguments.
        _ => {}
    }
    Ok(())
}

fn check_mount(spec: &str, stages: &Stages) -> Result<(), ContainerfileErrorKind> {
    let bad = |message: String| ContainerfileErrorKind::InvalidFlag {
        flag: "mount".to_owned(),
        message,
    };
    let mut kind = "bind";
    let mut target = false;
    let mut from = None;
    for field in spec.split(',') {
        let (key, value) = match field.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim()),
            None => (field.trim().to_ascii_lowercase(), ""),
        };
        match key.as_str() {
            "type" => kind = value,
            "target" | "dst" | "destination" => target = !value.is_empty(),
            "from" => from = Some(value),
            "" => return Err(bad(format!("empty option in {spec:?}"))),
            _ => {}
        }
    }
    if !matches!(kind, "bind" | "cache" | "tmpfs" | "secret" | "ssh") {
        return Err(bad(format!(
            "unknown mount type {kind:?} (bind, cache, tmpfs, secret, ssh)"
        )));
    }
    if matches!(kind, "bind" | "cache" | "tmpfs") && !target {
        return Err(bad(format!("a {kind} mount needs target=")));
    }
    if let Some(from) = from {
        if from.is_empty() {
            return Err(bad("from= is empty".to_owned()));
        }
        check_reference(from, stages, true)?;
    }
    Ok(())
}

/// A FROM image (`in_stage` false: every stage so far is earlier), or a `--from` or
/// `--mount from=` inside the current stage (`in_stage` true): an earlier stage by name
/// (or, inside a stage, by index), else an image reference. A stage naming itself is an
/// error.
fn check_reference(
    value: &str,
    stages: &Stages,
    in_stage: bool,
) -> Result<(), ContainerfileErrorKind> {
    if value.contains('$') {
        return Ok(());
    }
    let lower = value.to_ascii_lowercase();
    let earlier = if in_stage {
        if stages.names.last().and_then(|n| n.as_deref()) == Some(lower.as_str()) {
            return Err(ContainerfileErrorKind::SelfReference(value.to_owned()));
        }
        &stages.names[..stages.names.len().saturating_sub(1)]
    } else {
        &stages.names[..]
    };
    if stages.predefined.contains(&lower) || earlier.iter().flatten().any(|n| *n == lower) {
        return Ok(());
    }
    if in_stage && let Ok(index) = value.parse::<usize>() {
        return if index < stages.predefined.len() + earlier.len() {
            Ok(())
        } else {
            Err(ContainerfileErrorKind::UnknownStageOrImage(
                value.to_owned(),
            ))
        };
    }
    if is_image_reference(value) {
        Ok(())
    } else {
        Err(ContainerfileErrorKind::UnknownStageOrImage(
            value.to_owned(),
        ))
    }
}

/// BuildKit's stage names, lowercased: `[a-z][a-z0-9-_.]*`.
fn is_stage_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
}

fn is_port(word: &str) -> bool {
    let (ports, proto) = match word.split_once('/') {
        Some((p, proto)) => (p, Some(proto.to_ascii_lowercase())),
        None => (word, None),
    };
    let number = |s: &str| !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit());
    let ports_ok = match ports.split_once('-') {
        Some((a, b)) => number(a) && number(b),
        None => number(ports),
    };
    ports_ok && proto.is_none_or(|p| matches!(p.as_str(), "tcp" | "udp" | "sctp"))
}

/// An image reference by the distribution grammar: `[host[:port]/]path[:tag][@algo:hex]`.
pub fn is_image_reference(value: &str) -> bool {
    let (name_tag, digest) = match value.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (value, None),
    };
    if let Some(d) = digest {
        let Some((algo, hex)) = d.split_once(':') else {
            return false;
        };
        let algo_ok = !algo.is_empty()
            && algo.split(['+', '.', '_', '-']).all(|p| {
                !p.is_empty()
                    && p.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
            });
        if !algo_ok || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return false;
        }
    }
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_tag[..last_slash + i],
            Some(&name_tag[last_slash + i + 1..]),
        ),
        None => (name_tag, None),
    };
    if let Some(tag) = tag {
        let ok = !tag.is_empty()
            && tag.len() <= 128
            && tag.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
            && tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !ok {
            return false;
        }
    }
    if name.is_empty() || name.len() > 255 {
        return false;
    }
    let mut components: Vec<&str> = name.split('/').collect();
    if components.len() > 1 {
        let first = components[0];
        if first.contains(['.', ':'])
            || first == "localhost"
            || first.bytes().any(|b| b.is_ascii_uppercase())
        {
            if !is_host(first) {
                return false;
            }
            components.remove(0);
        }
    }
    components.iter().all(|c| is_path_component(c))
}

fn is_host(host: &str) -> bool {
    let (name, port) = match host.split_once(':') {
        Some((n, p)) => (n, Some(p)),
        None => (host, None),
    };
    let labels_ok = name.split('.').all(|l| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    });
    labels_ok && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`.
fn is_path_component(c: &str) -> bool {
    let bytes = c.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|b| b == b'-');
        if !ok {
            return false;
        }
    }
    true
}
