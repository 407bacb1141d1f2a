"""Inspection of content that passes through assay (docs/inspect.md).

Sans-IO: plain strings and JSON values in, plain values out; no clock, no files, no trio.

- :mod:`~assay.inspect.secrets`: finds secrets (keys, tokens, passwords) in text and JSON
  values and redacts them, as ``[REDACTED:<kind>]``. Wrap's ``--log-arguments`` uses it for
  the arguments it records (docs/wrap-records.md, "Logged arguments").
- :mod:`~assay.inspect.injection`: finds instructions aimed at the model in what a server sends
  back (invisible characters, terminal escapes, injection phrases) and, in tool descriptions,
  requests to read files, send data or keep secrets (docs/inspect.md, "Injected instructions").
- :mod:`~assay.inspect.taint`: a bounded set of keyed fingerprints of tainted values and texts,
  found again in a later text as is, base64, hex or percent-encoded (docs/inspect.md, "Value
  taint"); :mod:`~assay.inspect.taint_bytes` holds its byte-level helpers.
- :mod:`~assay.inspect.scan`: every string of a JSON value looked at by the detectors, with
  its JSON Pointer, and a line rewritten only where a string changed (docs/inspect.md, "Where
  wrap looks"); :mod:`~assay.inspect.blobs` reads base64 blobs as text for it ("Blobs").
- :mod:`~assay.inspect.userrules`: the policy's own secret rules (a kind and a regex of the
  flow rules' dialect), masked by words; :func:`~assay.inspect.userrules.redact_all` applies
  them with the built-in ones.
- :mod:`~assay.inspect.secret_rules`: the rules of the secret detector, and how each is
  searched; :mod:`~assay.inspect.secret_keys`: the one table of keys that name a secret (text
  assignments and JSON members alike).
- :mod:`~assay.inspect.prefilter`: which sets of regexes match a text, in one pass of
  google-re2's set; the detectors' prefilter (docs/inspect.md, "Speed").
- :mod:`~assay.inspect.normalize`: the text the detectors read (invisible characters removed,
  NFKC, look-alike letters) and the way back to the original's spans (docs/inspect.md,
  "Normalization").
"""
