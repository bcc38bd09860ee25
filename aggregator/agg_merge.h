/* agg_merge: the aggregator's pure data work (no I/O): merging the learners'
 * results into one (protocol.md, "Merging results") and splitting a learn
 * task's data among the learners ("The aggregator's semantics").
 *
 * Ownership: inputs are borrowed and left untouched; results are new and
 * owned by the caller (cJSON_Delete() / free()).
 * Threading: pure functions, safe from any thread. */
#ifndef AGG_MERGE_H
#define AGG_MERGE_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Merges values[0..n) (the learners' results, in learner order; names[i]
 * names learner i in messages, names may be NULL: "#i") by the first value:
 * - null, number, string or bool: the list of all values, whatever the later
 *   ones are (the reference does so; no error);
 * - list: the concatenation of all the lists;
 * - object: the first value's keys, in its order; for learner_step,
 *   buffer_id, task_id and learner_done the first value's member (the others
 *   are not looked at, may even lack it), for every other key the merge of
 *   that key's values. Keys only later learners have are dropped.
 * A NULL values[i] counts as JSON null. Values must be full trees
 * (jsonx_parse; numbers may be Raw); a Raw item holding a list or object
 * text is refused.
 * Returns a new tree, or NULL with err saying where the shapes disagree:
 * "cannot merge results: at key path 'info.x' learner 'learner1' has a list
 * where 'learner0' has an object" (a list or an object beside anything
 * else; a key of the first object missing in a later one: "has no value").
 * n == 0: NULL with an error. */
cJSON *agg_merge(cJSON *const *values, size_t n, const char *const *names, char *err,
                 size_t errlen);

/* Splits the learn task's "data" (a cJSON array, or a Raw item holding an
 * array's text as jsonx_parse_shallow leaves it) in order: slices[i] gets
 * the demands[i] items after the first demands[0] + ... + demands[i-1], as a
 * new heap JSON array text (NUL-terminated, length in slice_lens[i] unless
 * slice_lens is NULL), items joined by "," with their exact text (Raw
 * input) or compact printing (tree input), so both inputs give the same
 * slices when items are compact. A demand of 0 gives "[]".
 * Returns 0, or -1 with every slices[i] NULL and err saying why: "learn data
 * has 30 items but the learners asked for 32 (8+8+8+8)", data not a list or
 * not valid JSON. */
int agg_split(const cJSON *data, const size_t *demands, size_t n, char **slices,
              size_t *slice_lens, char *err, size_t errlen);

/* Like agg_split(), but each output is already the whole data of learner
 * i's learn task, {"name": "learner_learn_task", "data": <slice>} (only
 * these two fields, as protocol.md says the aggregator forwards), built in
 * one pass with no copy of a slice into a task: what the aggregator sends. */
int agg_split_learn_tasks(const cJSON *data, const size_t *demands, size_t n, char **tasks,
                          size_t *task_lens, char *err, size_t errlen);

/* Like agg_split_learn_tasks(), but each tasks[i] starts with head_room
 * bytes left for the caller (blank), then the task text (task_lens[i]
 * bytes, NUL-terminated), and has room for tail_room more bytes after the
 * text: its size is at least head_room + task_lens[i] + tail_room + 1. The
 * text is where master_task_send_framed() wants it, so that no byte of a
 * slice is copied again. data's items may be refs of jsonx_parse_refs()
 * into ref_base (the parsed text; NULL if there are none): their bytes are
 * copied straight from there, once. */
int agg_split_learn_tasks_framed(const cJSON *data, const char *ref_base, const size_t *demands, size_t n,
                                 size_t head_room, size_t tail_room, char **tasks, size_t *task_lens,
                                 char *err, size_t errlen);

/* One learner's items as one run of the text they were parsed from: the
 * bytes [off, off + len) of it, from the first item's first byte to the
 * last item's last byte (the separators and white space between are the
 * text's own). len 0 for a demand of 0. */
typedef struct {
    size_t off, len;
} agg_span;

/* The split of agg_split(), as spans instead of copies, for data whose
 * items are refs of jsonx_parse_refs() into text (text_len bytes): learner
 * i's task text is then "{\"name\": \"learner_learn_task\", \"data\": ["
 * (AGG_LEARN_HEAD), its span, "]}" (AGG_LEARN_TAIL) - the bytes
 * agg_split_learn_tasks_framed() builds when the text's items are joined by
 * a bare ",", else the same apart from white space between items.
 * Returns 0 with spans[0..n) set; 1 if the spans cannot carry data (an
 * item is not a ref, or two consecutive items are not neighbours in the
 * text: something besides a comma and white space lies between them), so
 * that the caller copies with agg_split_learn_tasks_framed() (also when
 * data is not a list: that split says what is wrong, or text is NULL); -1
 * with err as agg_split() says it when the count does not match the
 * demands. One pass over the items, reading only their separators. */
int agg_split_spans(const cJSON *data, const char *text, size_t text_len, const size_t *demands, size_t n,
                    agg_span *spans, char *err, size_t errlen);
#define AGG_LEARN_HEAD "{\"name\": \"learner_learn_task\", \"data\": ["
#define AGG_LEARN_TAIL "]}"

#endif
