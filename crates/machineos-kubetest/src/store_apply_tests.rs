//! Store-level tests of server-side apply and managedFields.
