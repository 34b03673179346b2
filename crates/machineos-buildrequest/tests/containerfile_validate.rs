//! `validate`, table-driven: every error kind with the line it reports, and valid files
//! that use continuations, comments, parser directives, heredocs, stages and flags.

use machineos_buildrequest::containerfile::{
    ContainerfileErrorKind as K, is_image_reference, validate,
};

fn kind_name(k: &K) -> &'static str {
    match k {
        K::UnknownInstruction(_) => "UnknownInstruction",
        K::EmptyArguments(_) => "EmptyArguments",
        K::BeforeFrom(_) => "BeforeFrom",
        K::NoFrom => "NoFrom",
        K::InvalidArguments { .. } => "InvalidArguments",
        K::InvalidStageName(_) => "InvalidStageName",
        K::DuplicateStageName(_) => "DuplicateStageName",
        K::UnknownFlag { .. } => "UnknownFlag",
        K::InvalidFlag { .. } => "InvalidFlag",
        K::UnknownStageOrImage(_) => "UnknownStageOrImage",
        K::SelfReference(_) => "SelfReference",
        K::UnterminatedHeredoc(_) => "UnterminatedHeredoc",
        K::ContinuationAtEnd => "ContinuationAtEnd",
        K::InvalidDirective { .. } => "InvalidDirective",
        K::MissingFromConfigs => "MissingFromConfigs",
    }
}

#[test]
fn invalid_files_report_the_kind_and_line() {
    // (file, kind, line, the line's text)
    let cases: &[(&str, &str, usize, &str)] = &[
        ("FROM a\nRUNN true\n", "UnknownInstruction", 2, "RUNN true"),
        (
            "FROM a\n\n# c\nfrobnicate x\n",
            "UnknownInstruction",
            4,
            "frobnicate x",
        ),
        ("FROM a\nRUN\n", "EmptyArguments", 2, "RUN"),
        ("FROM a\nCOPY   \n", "EmptyArguments", 2, "COPY   "),
        (
            "FROM a\nRUN --mount=type=tmpfs,target=/t\n",
            "EmptyArguments",
            2,
            "RUN --mount=type=tmpfs,target=/t",
        ),
        ("FROM a\nRUN []\n", "EmptyArguments", 2, "RUN []"),
        ("FROM\n", "EmptyArguments", 1, "FROM"),
        ("FROM a\nONBUILD RUN\n", "EmptyArguments", 2, "ONBUILD RUN"),
        ("# comment\nRUN true\nFROM a\n", "BeforeFrom", 2, "RUN true"),
        ("ARG V=1\nENV A=b\nFROM a\n", "BeforeFrom", 2, "ENV A=b"),
        ("", "NoFrom", 1, ""),
        ("# only a comment\n\n", "NoFrom", 1, "# only a comment"),
        ("ARG A\nARG B\n", "NoFrom", 2, "ARG B"),
        ("FROM a b\n", "InvalidArguments", 1, "FROM a b"),
        ("FROM a AS\n", "InvalidArguments", 1, "FROM a AS"),
        (
            "FROM a\nCOPY onlyone\n",
            "InvalidArguments",
            2,
            "COPY onlyone",
        ),
        (
            "FROM a\nADD [\"x\"]\n",
            "InvalidArguments",
            2,
            "ADD [\"x\"]",
        ),
        ("FROM a\nENV =x\n", "InvalidArguments", 2, "ENV =x"),
        ("FROM a\nENV A=1 B\n", "InvalidArguments", 2, "ENV A=1 B"),
        (
            "FROM a\nLABEL lonely\n",
            "InvalidArguments",
            2,
            "LABEL lonely",
        ),
        ("FROM a\nARG =1\n", "InvalidArguments", 2, "ARG =1"),
        (
            "FROM a\nEXPOSE 80/icmp\n",
            "InvalidArguments",
            2,
            "EXPOSE 80/icmp",
        ),
        (
            "FROM a\nEXPOSE http\n",
            "InvalidArguments",
            2,
            "EXPOSE http",
        ),
        ("FROM a\nUSER a b\n", "InvalidArguments", 2, "USER a b"),
        (
            "FROM a\nSHELL /bin/sh -c\n",
            "InvalidArguments",
            2,
            "SHELL /bin/sh -c",
        ),
        (
            "FROM a\nHEALTHCHECK curl x\n",
            "InvalidArguments",
            2,
            "HEALTHCHECK curl x",
        ),
        (
            "FROM a\nHEALTHCHECK NONE x\n",
            "InvalidArguments",
            2,
            "HEALTHCHECK NONE x",
        ),
        (
            "FROM a\nONBUILD FROM b\n",
            "InvalidArguments",
            2,
            "ONBUILD FROM b",
        ),
        (
            "FROM a\nONBUILD ONBUILD RUN x\n",
            "InvalidArguments",
            2,
            "ONBUILD ONBUILD RUN x",
        ),
        (
            "FROM a\nONBUILD BOGUS x\n",
            "UnknownInstruction",
            2,
            "ONBUILD BOGUS x",
        ),
        ("FROM a AS 1st\n", "InvalidStageName", 1, "FROM a AS 1st"),
        ("FROM a AS b/c\n", "InvalidStageName", 1, "FROM a AS b/c"),
        (
            "FROM a AS one\nFROM b AS ONE\n",
            "DuplicateStageName",
            2,
            "FROM b AS ONE",
        ),
        (
            "FROM a\nCOPY --form=x a b\n",
            "UnknownFlag",
            2,
            "COPY --form=x a b",
        ),
        (
            "FROM a\nRUN --from=x true\n",
            "UnknownFlag",
            2,
            "RUN --from=x true",
        ),
        (
            "FROM --plattform=linux/amd64 a\n",
            "UnknownFlag",
            1,
            "FROM --plattform=linux/amd64 a",
        ),
        (
            "FROM a\nCOPY --from= a b\n",
            "InvalidFlag",
            2,
            "COPY --from= a b",
        ),
        (
            "FROM a\nRUN --mount=type=volume,target=/x true\n",
            "InvalidFlag",
            2,
            "RUN --mount=type=volume,target=/x true",
        ),
        (
            "FROM a\nRUN --mount=type=bind,source=/ true\n",
            "InvalidFlag",
            2,
            "RUN --mount=type=bind,source=/ true",
        ),
        (
            "FROM a\nRUN --mount=type=bind,from=,target=/x true\n",
            "InvalidFlag",
            2,
            "RUN --mount=type=bind,from=,target=/x true",
        ),
        (
            "FROM a\nCOPY --from=Not_An_Image a b\n",
            "UnknownStageOrImage",
            2,
            "COPY --from=Not_An_Image a b",
        ),
        (
            "FROM a\nCOPY --from=0 a b\n",
            "UnknownStageOrImage",
            2,
            "COPY --from=0 a b",
        ),
        (
            "FROM a AS one\nFROM b\nCOPY --from=2 a b\n",
            "UnknownStageOrImage",
            3,
            "COPY --from=2 a b",
        ),
        (
            "FROM a\nRUN --mount=from=UPPER..x,target=/x true\n",
            "UnknownStageOrImage",
            2,
            "RUN --mount=from=UPPER..x,target=/x true",
        ),
        (
            "FROM Bad_Image\n",
            "UnknownStageOrImage",
            1,
            "FROM Bad_Image",
        ),
        ("FROM a:\n", "UnknownStageOrImage", 1, "FROM a:"),
        (
            "FROM a AS me\nCOPY --from=me a b\n",
            "SelfReference",
            2,
            "COPY --from=me a b",
        ),
        (
            "FROM a AS me\nRUN --mount=type=bind,from=ME,target=/m true\n",
            "SelfReference",
            2,
            "RUN --mount=type=bind,from=ME,target=/m true",
        ),
        (
            "FROM a\nRUN <<EOF\necho hi\nEFO\n",
            "UnterminatedHeredoc",
            2,
            "RUN <<EOF",
        ),
        (
            "FROM a\nRUN <<-END\n\techo\n  END\n",
            "UnterminatedHeredoc",
            2,
            "RUN <<-END",
        ),
        (
            "FROM a\nCOPY <<A <<B /dst/\na\nA\nb\n",
            "UnterminatedHeredoc",
            2,
            "COPY <<A <<B /dst/",
        ),
        (
            "FROM a\nRUN echo \\\n",
            "ContinuationAtEnd",
            2,
            "RUN echo \\",
        ),
        (
            "FROM a\nRUN echo \\\n# a comment\n\n",
            "ContinuationAtEnd",
            2,
            "RUN echo \\",
        ),
        ("# escape=x\nFROM a\n", "InvalidDirective", 1, "# escape=x"),
        (
            "# syntax=docker/dockerfile:1\n# SYNTAX=docker/dockerfile:1\nFROM a\n",
            "InvalidDirective",
            2,
            "# SYNTAX=docker/dockerfile:1",
        ),
        ("FROM a\r\nRUNN x\r\n", "UnknownInstruction", 2, "RUNN x"),
    ];
    let mut failures = Vec::new();
    for (file, kind, line, text) in cases {
        match validate(file) {
            Ok(()) => failures.push(format!("{file:?}: accepted, want {kind} at line {line}")),
            Err(e) => {
                if kind_name(&e.kind) != *kind || e.line != *line || e.text != *text {
                    failures.push(format!(
                        "{file:?}: got {} at line {} {:?} ({e}), want {kind} at line {line} {text:?}",
                        kind_name(&e.kind),
                        e.line,
                        e.text
                    ));
                }
                assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn valid_files_pass() {
    let files: &[&str] = &[
        // The minimum, ARG before FROM, lowercase instructions.
        "FROM scratch\n",
        "ARG BASE=quay.io/a/b:1\nfrom ${BASE}\nrun true\n",
        // Continuations, with comments and a blank line inside, trailing blanks after `\`.
        "FROM a\nRUN dnf install -y \\\n    # tools\n    tmux \\  \n\n    vim && \\\n    dnf clean all\n",
        // The escape directive turns continuations into backticks; backslashes are text.
        "# escape=`\n# syntax=docker/dockerfile:1\nFROM a\nRUN echo c:\\ `\n    && echo done\n",
        // An unknown directive is a comment, and ends the directives.
        "# foo=bar\n# escape=x\nFROM a\n",
        // Heredocs: quoted, <<- with tabs, several in one COPY, a nested one in the body,
        // text that looks like instructions in a body, and a here-string.
        "FROM a\nRUN bash <<'EOF'\nset -e\ncat > /x <<REPO\nFROM nothing\nREPO\nEOF\nRUN <<-\"END\" sh\n\techo x\n\tEND\nCOPY <<A <<B /dst/\none\nA\ntwo\nB\nRUN cat <<<\"hi\"\n",
        // A heredoc marker inside quotes is not a heredoc.
        "FROM a\nRUN echo \"<<EOF\"\n",
        // Stages: by name, case-insensitive, by index, images in --from and --mount.
        "FROM quay.io/a/b:1 AS Builder\nRUN make\nFROM registry.example.com:5000/x/y@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef AS final\nCOPY --from=builder /out /out\nCOPY --from=0 --chown=1000:1000 --chmod=0644 /a /b\nCOPY --from=docker.io/library/busybox:1.36 /bin/busybox /bin/\nRUN --mount=type=bind,from=BUILDER,source=/out,target=/mnt \\\n    --mount=type=cache,target=/var/cache/dnf --network=none ls /mnt\nRUN --mount=type=secret,id=token cat /run/secrets/token\n",
        // The other instructions, in their forms.
        "FROM a\nENV A=1 B=\"two words\"\nENV LEGACY value with spaces\nLABEL a=b \"c d\"=e\nARG X Y=2\nWORKDIR /srv\nUSER 1000:1000\nEXPOSE 80 443/tcp 8000-8010/udp ${PORT}\nVOLUME [\"/data\"]\nVOLUME /a /b\nENTRYPOINT [\"/bin/app\"]\nCMD [\"--help\"]\nCMD []\nSHELL [\"/bin/bash\", \"-c\"]\nSTOPSIGNAL SIGTERM\nHEALTHCHECK --interval=5s --retries=3 CMD curl -f http://localhost/\nHEALTHCHECK NONE\nONBUILD RUN echo hi\nMAINTAINER someone\nADD --checksum=sha256:abc --link https://example.com/x.tar /x\nRUN [\"/bin/true\"]\n",
        // CRLF line ends.
        "FROM a\r\nRUN echo \\\r\n  hi\r\n",
    ];
    for file in files {
        if let Err(e) = validate(file) {
            panic!("{file:?}: {e}");
        }
    }
}

#[test]
fn image_references() {
    for good in [
        "scratch",
        "ubi9",
        "quay.io/openshift/rhcos:4.18",
        "localhost/x",
        "localhost:5000/a/b_c/d--e:tag-1.0",
        "Registry.Example.COM/a@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "a:b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        assert!(is_image_reference(good), "{good}");
    }
    for bad in [
        "",
        "A",
        "a b",
        "a:",
        "a/:b",
        "a//b",
        "-a",
        "a_",
        "a@sha256:xyz",
        "a@sha256",
        "quay.io:port/a",
        "a:-tag",
    ] {
        assert!(!is_image_reference(bad), "{bad}");
    }
}

proptest::proptest! {
    /// Any text built from Containerfile fragments gets an answer, never a panic, and an
    /// error's line is a line of the text.
    #[test]
    fn validate_never_panics(parts in proptest::collection::vec(proptest::sample::select(vec![
        "FROM a", "FROM a AS b", "FROM b", "ARG X", "RUN true", "RUN <<EOF", "EOF", "<<-E", "\tE",
        "\\", " \\", "`", "# escape=`", "# syntax=x", "#", "", " ", "COPY --from=0 a b",
        "COPY --from=b a b", "RUN --mount=type=bind,from=b,target=/x true", "\r", "\"", "'",
        "ONBUILD", "HEALTHCHECK", "ENV", "=", "[", "]", "EXPOSE 1-", "LABEL a=", "é",
    ]), 0..12), newlines in proptest::collection::vec(proptest::bool::ANY, 12)) {
        let mut text = String::new();
        for (part, newline) in parts.iter().zip(&newlines) {
            text.push_str(part);
            text.push(if *newline { '\n' } else { ' ' });
        }
        if let Err(e) = validate(&text) {
            let lines = text.split('\n').count().max(1);
            proptest::prop_assert!(e.line >= 1 && e.line <= lines, "{e} in {text:?}");
        }
    }
}
