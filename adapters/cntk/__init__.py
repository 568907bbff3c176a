"""CNTK: listed for the studies that used it, never run (its manifest says why)."""
