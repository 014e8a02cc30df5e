//! slotpartner: the partner side of the slot-machine game service interface.
