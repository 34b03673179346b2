//! The block emitter of gopkg.in/yaml.v2 2.4.0 (`emitterc.go`, itself a port of libyaml's
//! emitter), restricted to what `yaml.Marshal` produces for JSON data: block mappings and
//! sequences, flow `{}`/`[]` for empty ones, scalars without tags or anchors, best width 80,
//! best indent 2, `\n` line breaks, unicode output.
//!
//! The functions keep the names and the order of the original so a reader can check them side
//! by side: [`Emitter::analyze_scalar`] (`yaml_emitter_analyze_scalar`),
//! [`Emitter::select_scalar_style`] (`yaml_emitter_select_scalar_style`), the four scalar
//! writers, `write_indent` and `write_indicator`. Positions are byte offsets into UTF-8
//! text; the column counts characters, as the original does. The original reads past a
//! value's end in a few unreachable cases (it would panic in Go); here those reads are `false`.

use crate::Node;

/// Wider lines are folded at a space (`best_width`).
const BEST_WIDTH: usize = 80;
/// Indentation step (`best_indent`).
const BEST_INDENT: isize = 2;
/// A key longer than this is written as `? key` (`yaml_emitter_check_simple_key`).
const MAX_SIMPLE_KEY: usize = 128;

/// The scalar styles the emitter chooses between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    Plain,
    SingleQuoted,
    DoubleQuoted,
    Literal,
}

#[derive(Debug, Default, Clone, Copy)]
struct ScalarData {
    multiline: bool,
    flow_plain_allowed: bool,
    block_plain_allowed: bool,
    single_quoted_allowed: bool,
    block_allowed: bool,
}

/// The emitter's state (`yaml_emitter_t`, the fields this subset reads).
pub(crate) struct Emitter {
    out: Vec<u8>,
    column: usize,
    indent: isize,
    indents: Vec<isize>,
    whitespace: bool,
    indention: bool,
    open_ended: bool,
    flow_level: usize,
    root_context: bool,
    mapping_context: bool,
    simple_key_context: bool,
}

impl Emitter {
    /// `yaml_emitter_emit_stream_start` then an implicit document start.
    pub(crate) fn new() -> Self {
        Emitter {
            out: Vec::new(),
            column: 0,
            indent: -1,
            indents: Vec::new(),
            whitespace: true,
            indention: true,
            open_ended: false,
            flow_level: 0,
            root_context: false,
            mapping_context: false,
            simple_key_context: false,
        }
    }

    /// Emits one document whose root is `node`, then ends it and the stream.
    pub(crate) fn document(mut self, node: &Node) -> Vec<u8> {
        self.emit_node(node, true, false, false);
        // yaml_emitter_emit_document_end (implicit): a final line break.
        self.write_indent();
        // The encoder clears open_ended before STREAM-END, so no "..." is written.
        self.open_ended = false;
        self.out
    }

    fn emit_node(&mut self, node: &Node, root: bool, mapping: bool, simple_key: bool) {
        self.root_context = root;
        self.mapping_context = mapping;
        self.simple_key_context = simple_key;
        match node {
            Node::Scalar(value, style) => self.emit_scalar(value.as_bytes(), *style),
            Node::Sequence(items) if items.is_empty() => self.emit_empty_flow(b'[', b']'),
            Node::Mapping(entries) if entries.is_empty() => self.emit_empty_flow(b'{', b'}'),
            Node::Sequence(items) => self.emit_block_sequence(items),
            Node::Mapping(entries) => self.emit_block_mapping(entries),
        }
    }

    /// `yaml_emitter_emit_flow_sequence_item` / `_flow_mapping_key` for a collection whose
    /// next event is its end.
    fn emit_empty_flow(&mut self, open: u8, close: u8) {
        self.write_indicator(&[open], true, true, false);
        self.increase_indent(true, false);
        self.flow_level += 1;
        self.flow_level -= 1;
        self.pop_indent();
        self.write_indicator(&[close], false, false, false);
    }

    fn emit_block_sequence(&mut self, items: &[Node]) {
        let indentless = self.mapping_context && !self.indention;
        self.increase_indent(false, indentless);
        for item in items {
            self.write_indent();
            self.write_indicator(b"-", true, false, true);
            self.emit_node(item, false, false, false);
        }
        self.pop_indent();
    }

    fn emit_block_mapping(&mut self, entries: &[(Node, Node)]) {
        self.increase_indent(false, false);
        for (key, value) in entries {
            self.write_indent();
            if self.check_simple_key(key) {
                self.emit_node(key, false, true, true);
                // yaml_emitter_emit_block_mapping_value, simple.
                self.write_indicator(b":", false, false, false);
            } else {
                self.write_indicator(b"?", true, false, true);
                self.emit_node(key, false, true, false);
                self.write_indent();
                self.write_indicator(b":", true, false, true);
            }
            self.emit_node(value, false, true, false);
        }
        self.pop_indent();
    }

    /// `yaml_emitter_check_simple_key` for the key about to be written.
    fn check_simple_key(&self, key: &Node) -> bool {
        match key {
            Node::Scalar(value, _) => {
                let data = analyze_scalar(value.as_bytes());
                !data.multiline && value.len() <= MAX_SIMPLE_KEY
            }
            Node::Sequence(items) => items.is_empty(),
            Node::Mapping(entries) => entries.is_empty(),
        }
    }

    fn emit_scalar(&mut self, value: &[u8], requested: Style) {
        let data = analyze_scalar(value);
        let style = self.select_scalar_style(value, requested, &data);
        self.increase_indent(true, false);
        let allow_breaks = !self.simple_key_context;
        match style {
            Style::Plain => self.write_plain_scalar(value, allow_breaks),
            Style::SingleQuoted => self.write_single_quoted_scalar(value, allow_breaks),
            Style::DoubleQuoted => self.write_double_quoted_scalar(value, allow_breaks),
            Style::Literal => self.write_literal_scalar(value),
        }
        self.pop_indent();
    }

    /// `yaml_emitter_select_scalar_style`, for implicit (untagged) scalars.
    fn select_scalar_style(&self, value: &[u8], requested: Style, data: &ScalarData) -> Style {
        let mut style = requested;
        if self.simple_key_context && data.multiline {
            style = Style::DoubleQuoted;
        }
        if style == Style::Plain {
            if (self.flow_level > 0 && !data.flow_plain_allowed)
                || (self.flow_level == 0 && !data.block_plain_allowed)
            {
                style = Style::SingleQuoted;
            }
            if value.is_empty() && (self.flow_level > 0 || self.simple_key_context) {
                style = Style::SingleQuoted;
            }
        }
        if style == Style::SingleQuoted && !data.single_quoted_allowed {
            style = Style::DoubleQuoted;
        }
        if style == Style::Literal
            && (!data.block_allowed || self.flow_level > 0 || self.simple_key_context)
        {
            style = Style::DoubleQuoted;
        }
        style
    }

    fn increase_indent(&mut self, flow: bool, indentless: bool) {
        self.indents.push(self.indent);
        if self.indent < 0 {
            self.indent = if flow { BEST_INDENT } else { 0 };
        } else if !indentless {
            self.indent += BEST_INDENT;
        }
    }

    fn pop_indent(&mut self) {
        // Every pop follows its own push.
        self.indent = self.indents.pop().unwrap_or(-1);
    }

    fn put(&mut self, byte: u8) {
        self.out.push(byte);
        self.column += 1;
    }

    fn put_break(&mut self) {
        self.out.push(b'\n');
        self.column = 0;
    }

    /// Copies the character at `*i` and advances past it.
    fn write(&mut self, s: &[u8], i: &mut usize) {
        let w = width(s[*i]).max(1);
        self.out.extend_from_slice(&s[*i..*i + w]);
        self.column += 1;
        *i += w;
    }

    fn write_all(&mut self, s: &[u8]) {
        let mut i = 0;
        while i < s.len() {
            self.write(s, &mut i);
        }
    }

    fn write_break(&mut self, s: &[u8], i: &mut usize) {
        if s[*i] == b'\n' {
            self.put_break();
            *i += 1;
        } else {
            self.write(s, i);
            self.column = 0;
        }
    }

    fn write_indent(&mut self) {
        let indent = self.indent.max(0) as usize;
        if !self.indention || self.column > indent || (self.column == indent && !self.whitespace) {
            self.put_break();
        }
        while self.column < indent {
            self.put(b' ');
        }
        self.whitespace = true;
        self.indention = true;
    }

    fn write_indicator(
        &mut self,
        indicator: &[u8],
        need_whitespace: bool,
        is_whitespace: bool,
        is_indention: bool,
    ) {
        if need_whitespace && !self.whitespace {
            self.put(b' ');
        }
        self.write_all(indicator);
        self.whitespace = is_whitespace;
        self.indention = self.indention && is_indention;
        self.open_ended = false;
    }

    fn write_plain_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        if !self.whitespace {
            self.put(b' ');
        }
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < value.len() {
            if is_space(value, i) {
                if allow_breaks && !spaces && self.column > BEST_WIDTH && !is_space(value, i + 1) {
                    self.write_indent();
                    i += width(value[i]);
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.whitespace = false;
        self.indention = false;
        if self.root_context {
            self.open_ended = true;
        }
    }

    fn write_single_quoted_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        self.write_indicator(b"'", true, false, false);
        let mut spaces = false;
        let mut breaks = false;
        let mut i = 0;
        while i < value.len() {
            if is_space(value, i) {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i < value.len() - 1
                    && !is_space(value, i + 1)
                {
                    self.write_indent();
                    i += width(value[i]);
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else if is_break(value, i) {
                if !breaks && value[i] == b'\n' {
                    self.put_break();
                }
                self.write_break(value, &mut i);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                if value[i] == b'\'' {
                    self.put(b'\'');
                }
                self.write(value, &mut i);
                self.indention = false;
                spaces = false;
                breaks = false;
            }
        }
        self.write_indicator(b"'", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_double_quoted_scalar(&mut self, value: &[u8], allow_breaks: bool) {
        let mut spaces = false;
        self.write_indicator(b"\"", true, false, false);
        // `is_bom` looks at the value's first three bytes whatever the position: a value
        // starting with U+FEFF has every character escaped. Kept as the original does it.
        let starts_with_bom = value.starts_with(&[0xEF, 0xBB, 0xBF]);
        let mut i = 0;
        while i < value.len() {
            if !is_printable(value, i)
                || starts_with_bom
                || is_break(value, i)
                || value[i] == b'"'
                || value[i] == b'\\'
            {
                let (w, v) = decode(value, i);
                i += w;
                self.put(b'\\');
                let short = match v {
                    0x00 => Some(b'0'),
                    0x07 => Some(b'a'),
                    0x08 => Some(b'b'),
                    0x09 => Some(b't'),
                    0x0A => Some(b'n'),
                    0x0B => Some(b'v'),
                    0x0C => Some(b'f'),
                    0x0D => Some(b'r'),
                    0x1B => Some(b'e'),
                    0x22 => Some(b'"'),
                    0x5C => Some(b'\\'),
                    0x85 => Some(b'N'),
                    0xA0 => Some(b'_'),
                    0x2028 => Some(b'L'),
                    0x2029 => Some(b'P'),
                    _ => None,
                };
                match short {
                    Some(c) => self.put(c),
                    None => {
                        let (prefix, digits) = if v <= 0xFF {
                            (b'x', 2)
                        } else if v <= 0xFFFF {
                            (b'u', 4)
                        } else {
                            (b'U', 8)
                        };
                        self.put(prefix);
                        for k in (0..digits).rev() {
                            let digit = ((v >> (k * 4)) & 0x0F) as u8;
                            self.put(if digit < 10 {
                                digit + b'0'
                            } else {
                                digit + b'A' - 10
                            });
                        }
                    }
                }
                spaces = false;
            } else if is_space(value, i) {
                if allow_breaks
                    && !spaces
                    && self.column > BEST_WIDTH
                    && i > 0
                    && i < value.len() - 1
                {
                    self.write_indent();
                    if is_space(value, i + 1) {
                        self.put(b'\\');
                    }
                    i += width(value[i]);
                } else {
                    self.write(value, &mut i);
                }
                spaces = true;
            } else {
                self.write(value, &mut i);
                spaces = false;
            }
        }
        self.write_indicator(b"\"", false, false, false);
        self.whitespace = false;
        self.indention = false;
    }

    fn write_block_scalar_hints(&mut self, value: &[u8]) {
        if is_space(value, 0) || is_break(value, 0) {
            let hint = [b'0' + BEST_INDENT as u8];
            self.write_indicator(&hint, false, false, false);
        }
        self.open_ended = false;
        let mut chomp = None;
        if value.is_empty() {
            chomp = Some(b'-');
        } else {
            let mut i = value.len() - 1;
            while value[i] & 0xC0 == 0x80 {
                i -= 1;
            }
            if !is_break(value, i) {
                chomp = Some(b'-');
            } else if i == 0 {
                chomp = Some(b'+');
                self.open_ended = true;
            } else {
                i -= 1;
                while value[i] & 0xC0 == 0x80 {
                    i -= 1;
                }
                if is_break(value, i) {
                    chomp = Some(b'+');
                    self.open_ended = true;
                }
            }
        }
        if let Some(c) = chomp {
            self.write_indicator(&[c], false, false, false);
        }
    }

    fn write_literal_scalar(&mut self, value: &[u8]) {
        self.write_indicator(b"|", true, false, false);
        self.write_block_scalar_hints(value);
        self.put_break();
        self.indention = true;
        self.whitespace = true;
        let mut breaks = true;
        let mut i = 0;
        while i < value.len() {
            if is_break(value, i) {
                self.write_break(value, &mut i);
                self.indention = true;
                breaks = true;
            } else {
                if breaks {
                    self.write_indent();
                }
                self.write(value, &mut i);
                self.indention = false;
                breaks = false;
            }
        }
    }
}

/// `yaml_emitter_analyze_scalar`.
fn analyze_scalar(value: &[u8]) -> ScalarData {
    if value.is_empty() {
        return ScalarData {
            multiline: false,
            flow_plain_allowed: false,
            block_plain_allowed: true,
            single_quoted_allowed: true,
            block_allowed: false,
        };
    }
    let mut block_indicators = false;
    let mut flow_indicators = false;
    let mut line_breaks = false;
    let mut special_characters = false;
    let mut leading_space = false;
    let mut leading_break = false;
    let mut trailing_space = false;
    let mut trailing_break = false;
    let mut break_space = false;
    let mut space_break = false;
    let mut previous_space = false;
    let mut previous_break = false;

    if value.starts_with(b"---") || value.starts_with(b"...") {
        block_indicators = true;
        flow_indicators = true;
    }
    let mut preceded_by_whitespace = true;
    let mut i = 0;
    while i < value.len() {
        let w = width(value[i]).max(1);
        let followed_by_whitespace = i + w >= value.len() || is_blank(value, i + w);
        if i == 0 {
            match value[i] {
                b'#' | b',' | b'[' | b']' | b'{' | b'}' | b'&' | b'*' | b'!' | b'|' | b'>'
                | b'\'' | b'"' | b'%' | b'@' | b'`' => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                b'?' | b':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                b'-' if followed_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        } else {
            match value[i] {
                b',' | b'?' | b'[' | b']' | b'{' | b'}' => flow_indicators = true,
                b':' => {
                    flow_indicators = true;
                    if followed_by_whitespace {
                        block_indicators = true;
                    }
                }
                b'#' if preceded_by_whitespace => {
                    flow_indicators = true;
                    block_indicators = true;
                }
                _ => {}
            }
        }
        // The encoder sets unicode output, so only unprintable characters are special.
        if !is_printable(value, i) {
            special_characters = true;
        }
        if is_space(value, i) {
            if i == 0 {
                leading_space = true;
            }
            if i + w == value.len() {
                trailing_space = true;
            }
            if previous_break {
                break_space = true;
            }
            previous_space = true;
            previous_break = false;
        } else if is_break(value, i) {
            line_breaks = true;
            if i == 0 {
                leading_break = true;
            }
            if i + w == value.len() {
                trailing_break = true;
            }
            if previous_space {
                space_break = true;
            }
            previous_space = false;
            previous_break = true;
        } else {
            previous_space = false;
            previous_break = false;
        }
        preceded_by_whitespace = is_blankz(value, i);
        i += w;
    }

    let mut data = ScalarData {
        multiline: line_breaks,
        flow_plain_allowed: true,
        block_plain_allowed: true,
        single_quoted_allowed: true,
        block_allowed: true,
    };
    if leading_space || leading_break || trailing_space || trailing_break {
        data.flow_plain_allowed = false;
        data.block_plain_allowed = false;
    }
    if trailing_space {
        data.block_allowed = false;
    }
    if break_space {
        data.flow_plain_allowed = false;
        data.block_plain_allowed = false;
        data.single_quoted_allowed = false;
    }
    if space_break || special_characters {
        data.flow_plain_allowed = false;
        data.block_plain_allowed = false;
        data.single_quoted_allowed = false;
        data.block_allowed = false;
    }
    if line_breaks {
        data.flow_plain_allowed = false;
        data.block_plain_allowed = false;
    }
    if flow_indicators {
        data.flow_plain_allowed = false;
    }
    if block_indicators {
        data.block_plain_allowed = false;
    }
    data
}

fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

/// `is_printable`: `\n`, `#x20-#x7E`, `#xA0-#xD7FF`, `#xE000-#xFFFD` except U+FEFF.
/// Characters outside the Basic Multilingual Plane are not printable to this emitter.
fn is_printable(b: &[u8], i: usize) -> bool {
    let c = at(b, i);
    c == 0x0A
        || (0x20..=0x7E).contains(&c)
        || (c == 0xC2 && at(b, i + 1) >= 0xA0)
        || (c > 0xC2 && c < 0xED)
        || (c == 0xED && at(b, i + 1) < 0xA0)
        || c == 0xEE
        || (c == 0xEF
            && !(at(b, i + 1) == 0xBB && at(b, i + 2) == 0xBF)
            && !(at(b, i + 1) == 0xBF && (at(b, i + 2) == 0xBE || at(b, i + 2) == 0xBF)))
}

fn is_space(b: &[u8], i: usize) -> bool {
    at(b, i) == b' '
}

fn is_blank(b: &[u8], i: usize) -> bool {
    matches!(at(b, i), b' ' | b'\t')
}

/// CR, LF, NEL (U+0085), LS (U+2028), PS (U+2029).
fn is_break(b: &[u8], i: usize) -> bool {
    let c = at(b, i);
    c == b'\r'
        || c == b'\n'
        || (c == 0xC2 && at(b, i + 1) == 0x85)
        || (c == 0xE2 && at(b, i + 1) == 0x80 && matches!(at(b, i + 2), 0xA8 | 0xA9))
}

fn is_blankz(b: &[u8], i: usize) -> bool {
    is_blank(b, i) || is_break(b, i) || at(b, i) == 0
}

fn width(c: u8) -> usize {
    if c & 0x80 == 0 {
        1
    } else if c & 0xE0 == 0xC0 {
        2
    } else if c & 0xF0 == 0xE0 {
        3
    } else if c & 0xF8 == 0xF0 {
        4
    } else {
        0
    }
}

/// The character at `i` and its width in bytes.
fn decode(b: &[u8], i: usize) -> (usize, u32) {
    let c = b[i];
    let (w, mut v) = match width(c) {
        2 => (2, u32::from(c & 0x1F)),
        3 => (3, u32::from(c & 0x0F)),
        4 => (4, u32::from(c & 0x07)),
        _ => (1, u32::from(c & 0x7F)),
    };
    for k in 1..w {
        v = (v << 6) + u32::from(at(b, i + k) & 0x3F);
    }
    (w, v)
}
