//! The filesystem index of a base image, built by streaming its layers once and cached by manifest digest.
