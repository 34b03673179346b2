//! `data:` URL decoding, exactly as Ignition's dataurl library does.
