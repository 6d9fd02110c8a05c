//! What of a logged event is indexed: its searchable text and whether it
//! is a model-visible (surface) event; and the snippet a hit shows.
