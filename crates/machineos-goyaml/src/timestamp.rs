//! yaml.v2's `parseTimestamp`: four digits and `-`, then one of Go layouts
//! `2006-1-2T15:4:5.999999999Z07:00` (also with `t`), `2006-1-2 15:4:5.999999999` and
//! `2006-1-2`, with `time.Parse`'s field rules (month and day one or two digits and in
//! range, hour/minute/second one or two digits and in range, fraction optional (`.` or
//! `,`, up to nine digits), zone `Z`
//! or `±hh:mm`).

pub(super) fn parses(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let year: u32 = s[..4].parse().unwrap_or(0);
    let mut p = Parser { b, i: 5 };
    let Some(month) = p.num(1, 2) else {
        return false;
    };
    if !p.eat(b'-') {
        return false;
    }
    let Some(day) = p.num(1, 2) else { return false };
    if !(1..=12).contains(&month) || day < 1 || day > days_in(month, year) {
        return false;
    }
    if p.done() {
        return true;
    }
    let sep = p.b[p.i];
    let zoned = match sep {
        b'T' | b't' => true,
        b' ' => false,
        _ => return false,
    };
    p.i += 1;
    let Some(hour) = p.num(1, 2) else {
        return false;
    };
    if !p.eat(b':') {
        return false;
    }
    let Some(minute) = p.num(1, 2) else {
        return false;
    };
    if !p.eat(b':') {
        return false;
    }
    let Some(second) = p.num(1, 2) else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 59 {
        return false;
    }
    // An optional fraction: '.' or ',' and up to nine digits (a tenth is left over).
    if matches!(p.b.get(p.i), Some(b'.' | b',')) && p.b.get(p.i + 1).is_some_and(u8::is_ascii_digit)
    {
        p.i += 1;
        let start = p.i;
        while p.i - start < 9 && p.b.get(p.i).is_some_and(u8::is_ascii_digit) {
            p.i += 1;
        }
    }
    if !zoned {
        return p.done();
    }
    match p.b.get(p.i) {
        Some(b'Z') => {
            p.i += 1;
            p.done()
        }
        Some(b'+' | b'-') => {
            p.i += 1;
            let (Some(h), true, Some(m)) = (p.fixed2(), p.eat(b':'), p.fixed2()) else {
                return false;
            };
            h <= 24 && m <= 60 && p.done()
        }
        _ => false,
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn done(&self) -> bool {
        self.i == self.b.len()
    }
    fn eat(&mut self, c: u8) -> bool {
        let ok = self.b.get(self.i) == Some(&c);
        self.i += usize::from(ok);
        ok
    }
    fn num(&mut self, min: usize, max: usize) -> Option<u32> {
        let start = self.i;
        while self.i - start < max && self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
            self.i += 1;
        }
        if self.i - start < min {
            return None;
        }
        std::str::from_utf8(&self.b[start..self.i])
            .ok()?
            .parse()
            .ok()
    }
    fn fixed2(&mut self) -> Option<u32> {
        self.num(2, 2)
    }
}

fn days_in(month: u32, year: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}
