"""Small widgets of the round dashboard; each renders one part of the event stream."""
