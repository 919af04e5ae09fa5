"""The fleet model of bench/fleet_model.py (issue 24), in parts:

  params      the Redis tier's wire format (bytes of each command and
              reply), its options (Settings), the measured times a
              validation feeds it (Timing) and the directory tier's lock
              polls (Disk);
  wave        the prediction: a simulated deploy wave, per-kernel counts
              turned into commands and bytes per server, and the
              connections left open at a point;
  tables      the fleet tables of docs/fleet.md (large fleets, by
              arithmetic on the same counts);
  validation  `validate`: a measured fleet (fleet_measure.py) against
              the prediction, as bench/run rows;
  selftest    the model on fixed inputs against counts worked out by hand.

What the model counts, and from which code, is in fleet_model.py's doc.
Python 3 standard library only.
"""
