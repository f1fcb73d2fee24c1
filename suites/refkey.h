/* refkey.h: the reference cache's key (see suite.h, "The reference cache").
 *
 * sha256 over NUL-separated parts: a format tag, the kind of output, the
 * reference artifact's sha256 and quant, the input data's hash, the suite's
 * settings, and the versions of what computed it: the gauntlet version and
 * GT_NUMERICS_VERSION (numerics.h). A database kept across a release or a
 * change of the reference's arithmetic then misses instead of serving
 * outputs the current oracle would not compute. A separate file so tests
 * can build keys for other versions than this build's. */
#ifndef GT_SUITE_REFKEY_H
#define GT_SUITE_REFKEY_H

void gt_ref_key(const char *kind, const char *model_sha256, const char *quant,
                const char *data_hash, const char *settings, const char *tool_version,
                int numerics_version, char key[65]);

#endif
