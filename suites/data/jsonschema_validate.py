"""Validates JSON documents against JSON Schemas with the jsonschema package
(an implementation we did not write): the oracle of constrained decoding.

usage: jsonschema_validate.py SCHEMA DOC [SCHEMA DOC ...]
Each DOC must parse as JSON and validate against its SCHEMA (the validator
class the schema's $schema names, else the latest draft). Prints one line per
pair; exits 1 when any pair fails, 2 on bad usage, 3 when the jsonschema
package does not import (the structured suite then reports an error: a
document nobody could judge is not valid)."""
import json
import sys

try:
    import jsonschema
except ImportError as e:
    print(f"cannot import jsonschema: {e}")
    sys.exit(3)


def main(args):
    if not args or len(args) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    bad = 0
    for schema_path, doc_path in zip(args[0::2], args[1::2]):
        with open(schema_path, encoding="utf-8") as f:
            schema = json.load(f)
        with open(doc_path, "rb") as f:
            raw = f.read()
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            print(f"FAIL {doc_path}: not JSON: {e}: {raw!r}")
            bad += 1
            continue
        cls = jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        errors = sorted(cls(schema).iter_errors(doc), key=str)
        if errors:
            print(f"FAIL {doc_path} against {schema_path}: {errors[0].message}")
            bad += 1
        else:
            print(f"ok {doc_path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
