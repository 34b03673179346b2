//! Unit-file syntax as Ignition spec 2.x checks it: a port of the 2019 go-systemd
//! `unit.Deserialize` (`github.com/coreos/go-systemd/unit`, vendored by the MCO) that
//! `config/v2_2/types/unit.go` calls. Its `bufio.Reader` is simulated too, because the
//! "line too long" check only looks ahead when 2048 bytes happen to be buffered.

/// go-systemd's `SYSTEMD_LINE_MAX`.
const LINE_MAX: usize = 2048;
/// `bufio`'s default buffer size.
const BUF: usize = 4096;

/// The parsed options of a unit: their sections, in order. `None` when the unit has no
/// options at all (Go's nil slice, which turns the `[Install]` check off).
pub(crate) type Sections = Option<Vec<String>>;

/// Parses unit contents; the error reads as Ignition's (`invalid unit content: …`).
pub(crate) fn parse(contents: &str) -> Result<Sections, String> {
    let mut l = Lexer {
        rd: Reader::new(contents.as_bytes()),
        sections: None,
    };
    l.lex().map_err(|e| format!("invalid unit content: {e}"))?;
    Ok(l.sections)
}

/// Whether a parsed unit has an `[Install]` section (`validations.ValidateInstallSection`).
pub(crate) fn has_install(sections: &[String]) -> bool {
    sections.iter().any(|s| s == "Install")
}

/// `bufio.Reader` over a `strings.Reader`: `data[r..w]` is what is buffered.
struct Reader<'a> {
    data: &'a [u8],
    r: usize,
    w: usize,
    eof: bool,
    last_rune: usize,
}

enum ReadErr {
    Eof,
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Reader<'a> {
        Reader {
            data,
            r: 0,
            w: 0,
            eof: false,
            last_rune: 0,
        }
    }

    fn buffered(&self) -> usize {
        self.w - self.r
    }

    fn fill(&mut self) {
        if self.w >= self.data.len() {
            self.eof = true;
        } else {
            self.w = self.data.len().min(self.r + BUF);
        }
    }

    /// `readErr`: reports the pending error once.
    fn take_err(&mut self) -> Option<ReadErr> {
        std::mem::take(&mut self.eof).then_some(ReadErr::Eof)
    }

    fn read_rune(&mut self) -> Result<char, ReadErr> {
        while self.r + 4 > self.w
            && !full_rune(&self.data[self.r..self.w])
            && !self.eof
            && self.buffered() < BUF
        {
            self.fill();
        }
        self.last_rune = 0;
        if self.r == self.w {
            return Err(self.take_err().unwrap_or(ReadErr::Eof));
        }
        let (c, size) = decode_rune(&self.data[self.r..self.w]);
        self.r += size;
        self.last_rune = size;
        Ok(c)
    }

    fn unread_rune(&mut self) {
        if self.last_rune > 0 && self.r >= self.last_rune {
            self.r -= self.last_rune;
        }
        self.last_rune = 0;
    }

    /// `ReadBytes(delim)`: up to and including `delim`, or to the end (then `eof`).
    fn read_bytes(&mut self, delim: u8) -> (Vec<u8>, bool) {
        let mut out = Vec::new();
        loop {
            // ReadSlice
            let mut s = 0;
            let full = loop {
                if let Some(i) = self.data[self.r + s..self.w]
                    .iter()
                    .position(|&c| c == delim)
                {
                    let end = self.r + s + i + 1;
                    out.extend_from_slice(&self.data[self.r..end]);
                    self.r = end;
                    self.last_rune = 0;
                    return (out, false);
                }
                if self.eof {
                    out.extend_from_slice(&self.data[self.r..self.w]);
                    self.r = self.w;
                    self.take_err();
                    self.last_rune = 0;
                    return (out, true);
                }
                if self.buffered() >= BUF {
                    break true;
                }
                s = self.w - self.r;
                self.fill();
            };
            if full {
                out.extend_from_slice(&self.data[self.r..self.w]);
                self.r = self.w;
            }
        }
    }

    /// `Peek(n)` with `n` bytes already buffered.
    fn peek(&self, n: usize) -> &'a [u8] {
        &self.data[self.r..self.w.min(self.r + n)]
    }
}

/// `utf8.FullRune`.
fn full_rune(b: &[u8]) -> bool {
    let Some(&first) = b.first() else {
        return false;
    };
    let need = match first {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 1,
    };
    if b.len() >= need {
        return true;
    }
    // An invalid continuation byte makes a (one-byte, invalid) full rune early.
    b.iter().skip(1).any(|&c| !(0x80..=0xbf).contains(&c))
}

/// `utf8.DecodeRune`: an invalid sequence is U+FFFD of width 1.
fn decode_rune(b: &[u8]) -> (char, usize) {
    for len in 1..=b.len().min(4) {
        if let Ok(s) = std::str::from_utf8(&b[..len])
            && let Some(c) = s.chars().next()
        {
            return (c, len);
        }
    }
    ('\u{fffd}', 1)
}

fn is_comment(c: char) -> bool {
    c == '#' || c == ';'
}

/// `bytes.TrimSpace`: Unicode white space off both ends; invalid UTF-8 is not space.
fn trim_space(mut b: &[u8]) -> &[u8] {
    while !b.is_empty() {
        let (c, size) = decode_rune(b);
        if !c.is_whitespace() {
            break;
        }
        b = &b[size..];
    }
    while !b.is_empty() {
        let (c, size) = decode_last_rune(b);
        if !c.is_whitespace() {
            break;
        }
        b = &b[..b.len() - size];
    }
    b
}

/// `utf8.DecodeLastRune`.
fn decode_last_rune(b: &[u8]) -> (char, usize) {
    for len in 1..=b.len().min(4) {
        if let Ok(s) = std::str::from_utf8(&b[b.len() - len..])
            && let Some(c) = s.chars().next()
        {
            return (c, len);
        }
    }
    ('\u{fffd}', 1)
}

enum Step {
    NextSection,
    SectionName,
    SectionSuffix(String),
    NextSectionOrOption(String),
    OptionName(String),
    OptionValue(String, String, Vec<u8>),
    IgnoreLine(Box<Step>),
}

struct Lexer<'a> {
    rd: Reader<'a>,
    sections: Sections,
}

impl Lexer<'_> {
    /// go-systemd's `toEOL`.
    fn read_line(&mut self) -> (Vec<u8>, bool) {
        let (mut line, eof) = self.rd.read_bytes(b'\n');
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        (line, eof)
    }

    fn lex(&mut self) -> Result<(), String> {
        let mut next = Some(Step::NextSection);
        while let Some(step) = next {
            if self.rd.buffered() >= LINE_MAX {
                let line = self.rd.peek(LINE_MAX);
                if !line.iter().any(|&c| c == b'\r' || c == b'\n') {
                    return Err(format!("line too long (max {LINE_MAX} bytes)"));
                }
            }
            next = self.step(step)?;
        }
        Ok(())
    }

    fn step(&mut self, step: Step) -> Result<Option<Step>, String> {
        Ok(match step {
            Step::NextSection => match self.rd.read_rune() {
                Err(ReadErr::Eof) => None,
                Ok('[') => Some(Step::SectionName),
                Ok(c) if is_comment(c) => Some(Step::IgnoreLine(Box::new(Step::NextSection))),
                Ok(_) => Some(Step::NextSection),
            },
            Step::SectionName => {
                let (sec, eof) = self.rd.read_bytes(b']');
                if eof {
                    return Err("unable to find end of section".into());
                }
                let name = &sec[..sec.len().saturating_sub(1)];
                Some(Step::SectionSuffix(
                    String::from_utf8_lossy(name).into_owned(),
                ))
            }
            Step::SectionSuffix(section) => {
                let (garbage, _) = self.read_line();
                let garbage = trim_space(&garbage);
                if !garbage.is_empty() {
                    // go-systemd prints the bytes with %v, and never sets the section it names.
                    let bytes: Vec<String> = garbage.iter().map(u8::to_string).collect();
                    return Err(format!(
                        "found garbage after section name : [{}]",
                        bytes.join(" ")
                    ));
                }
                Some(Step::NextSectionOrOption(section))
            }
            Step::NextSectionOrOption(section) => match self.rd.read_rune() {
                Err(ReadErr::Eof) => None,
                Ok(c) if c.is_whitespace() => Some(Step::NextSectionOrOption(section)),
                Ok('[') => Some(Step::SectionName),
                Ok(c) if is_comment(c) => Some(Step::IgnoreLine(Box::new(
                    Step::NextSectionOrOption(section),
                ))),
                Ok(_) => {
                    self.rd.unread_rune();
                    Some(Step::OptionName(section))
                }
            },
            Step::IgnoreLine(next) => {
                loop {
                    let (line, _) = self.read_line();
                    let line = line.strip_suffix(b" ").unwrap_or(&line);
                    if !line.ends_with(b"\\") {
                        break;
                    }
                }
                Some(*next)
            }
            Step::OptionName(section) => {
                let mut partial = String::new();
                loop {
                    match self.rd.read_rune() {
                        Err(ReadErr::Eof) => return Err("EOF".into()),
                        Ok('\n' | '\r') => {
                            return Err(
                                "unexpected newline encountered while parsing option name".into()
                            );
                        }
                        Ok('=') => break,
                        Ok(c) => partial.push(c),
                    }
                }
                let name = partial.trim_matches(char::is_whitespace).to_string();
                Some(Step::OptionValue(section, name, Vec::new()))
            }
            Step::OptionValue(section, name, mut partial) => {
                let (line, eof) = self.read_line();
                if !trim_space(&line).is_empty() {
                    partial.extend_from_slice(&line);
                    if line.last() == Some(&b'\\') {
                        if !eof {
                            partial.push(b'\n');
                        }
                        return Ok(Some(Step::OptionValue(section, name, partial)));
                    }
                }
                self.sections
                    .get_or_insert_with(Vec::new)
                    .push(section.clone());
                Some(Step::NextSectionOrOption(section))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_errors() {
        assert_eq!(
            parse("[Unit]\nA=b\n[Install]\nWantedBy=x\n"),
            Ok(Some(vec!["Unit".into(), "Install".into()]))
        );
        // No options at all: Go's nil slice.
        assert_eq!(parse("[Unit]\n# comment\n"), Ok(None));
        assert_eq!(parse(""), Ok(None));
        assert_eq!(
            parse("[Unit"),
            Err("invalid unit content: unable to find end of section".into())
        );
        assert_eq!(
            parse("[Unit] ab\n"),
            Err("invalid unit content: found garbage after section name : [97 98]".into())
        );
        assert_eq!(
            parse("[Unit]\nAbc\nDef=1\n"),
            Err(
                "invalid unit content: unexpected newline encountered while parsing option name"
                    .into()
            )
        );
        assert_eq!(
            parse("[Unit]\nAbc"),
            Err("invalid unit content: EOF".into())
        );
        // Continuations, comments with continuations, text before the first section.
        assert_eq!(
            parse("junk\n[Service]\nExecStart=a \\\n b\n# x \\\n y\n"),
            Ok(Some(vec!["Service".into()]))
        );
    }

    #[test]
    fn long_lines_only_when_buffered() {
        let long = "x".repeat(3000);
        assert_eq!(
            parse(&format!("[Unit]\nA={long}\n")),
            Err("invalid unit content: line too long (max 2048 bytes)".into())
        );
        // A long value that starts past the buffered window escapes the check, as in Go:
        // after `[Unit]\n` plus 4000 bytes of options, fewer than 2048 bytes are buffered.
        let mut s = String::from("[Unit]\n");
        while s.len() < 4090 {
            s.push_str("A=b\n");
        }
        s.push_str(&format!("B={long}\n"));
        assert!(parse(&s).is_ok(), "{:?}", parse(&s));
    }
}
