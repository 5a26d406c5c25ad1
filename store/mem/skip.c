/* The in-memory engine's ordered structure (mem.h): a skip list of keys,
 * each with its chain of versions.
 *
 * The algorithm (Pugh, "Skip lists: a probabilistic alternative to
 * balanced trees", 1990): every node is on level 0, a sorted linked list;
 * a node is also on levels 1 to k-1 with probability 1/4 per level, and
 * each level links the nodes on it in order. A search starts on the
 * highest level at the sentinel and goes right while the next key is
 * smaller, then down: O(log n) steps expected, with no rebalancing. An
 * insert links the new node after the last node of each of its levels
 * that the search passed (update[]); a removal unlinks it there. Level 0
 * also links backwards (prev), for reverse cursors. 24 levels serve
 * 4^24 keys.
 *
 * Versions: a node's chain is newest first; a reader at ver sees the first
 * version not newer than ver (mem_see). The trim frees every version
 * older than the one the oldest open snapshot sees. */
#include <stdlib.h>
#include <string.h>

#include "mem.h"

int mem_kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    size_t m = al < bl ? al : bl;
    int c = m ? memcmp(a, b, m) : 0;
    if (c) return c;
    return al < bl ? -1 : al > bl;
}

/* A node of level lv for key k, with no version. NULL: out of memory. */
static mem_node *node_new(int lv, const uint8_t *k, size_t kl) {
    mem_node *n = malloc(sizeof *n + (size_t)lv * sizeof n->next[0] + kl);
    if (!n) return NULL;
    memset(n, 0, sizeof *n + (size_t)lv * sizeof n->next[0]);
    n->level = (uint8_t)lv;
    n->klen = (uint16_t)kl;
    n->key = (uint8_t *)&n->next[lv];
    if (kl) memcpy(n->key, k, kl);
    return n;
}

int mem_list_init(mem_list *l) {
    l->head = node_new(MEM_LEVELS, NULL, 0);
    l->level = 1;
    l->rng = 0x9E3779B97F4A7C15ull;
    return l->head ? 0 : OST_ENOMEM;
}

/* Frees a chain of versions. */
static void chain_free(mem_ver *v) {
    while (v) {
        mem_ver *o = v->older;
        free(v);
        v = o;
    }
}

void mem_list_free(mem_list *l) {
    if (!l->head) return;
    for (mem_node *n = l->head->next[0], *nx; n; n = nx) {
        nx = n->next[0];
        chain_free(n->head);
        free(n);
    }
    free(l->head);
    l->head = NULL;
}

/* Fills upd[i] with the last node on level i before key k (the sentinel
 * when none); returns the node after upd[0] (the first >= k, or NULL). */
static mem_node *search(const mem_list *l, const uint8_t *k, size_t kl, mem_node **upd) {
    mem_node *x = l->head;
    for (int i = l->level - 1; i >= 0; i--) {
        while (x->next[i] && mem_kcmp(x->next[i]->key, x->next[i]->klen, k, kl) < 0)
            x = x->next[i];
        if (upd) upd[i] = x;
    }
    return x->next[0];
}

mem_node *mem_list_seek(const mem_list *l, const uint8_t *k, size_t kl) {
    return search(l, k, kl, NULL);
}

mem_node *mem_list_find(const mem_list *l, const uint8_t *k, size_t kl) {
    mem_node *n = search(l, k, kl, NULL);
    return n && !mem_kcmp(n->key, n->klen, k, kl) ? n : NULL;
}

mem_node *mem_list_first(const mem_list *l) { return l->head->next[0]; }

mem_node *mem_list_last(const mem_list *l) {
    mem_node *x = l->head;
    for (int i = l->level - 1; i >= 0; i--)
        while (x->next[i]) x = x->next[i];
    return x == l->head ? NULL : x;
}

/* A random level: 1, and one more with probability 1/4 each (xorshift64). */
static int random_level(mem_list *l) {
    int lv = 1;
    while (lv < MEM_LEVELS) {
        l->rng ^= l->rng << 13;
        l->rng ^= l->rng >> 7;
        l->rng ^= l->rng << 17;
        if (l->rng & 3) break;
        lv++;
    }
    return lv;
}

int mem_list_get(mem_list *l, const uint8_t *k, size_t kl, mem_node **out) {
    mem_node *upd[MEM_LEVELS];
    mem_node *n = search(l, k, kl, upd);
    if (n && !mem_kcmp(n->key, n->klen, k, kl)) {
        *out = n;
        return 0;
    }
    int lv = random_level(l);
    for (int i = l->level; i < lv; i++) upd[i] = l->head;
    if (lv > l->level) l->level = (uint8_t)lv;
    if (!(n = node_new(lv, k, kl))) return OST_ENOMEM;
    for (int i = 0; i < lv; i++) {
        n->next[i] = upd[i]->next[i];
        upd[i]->next[i] = n;
    }
    n->prev = upd[0] == l->head ? NULL : upd[0];
    if (n->next[0]) n->next[0]->prev = n;
    *out = n;
    return 0;
}

void mem_list_remove(mem_list *l, mem_node *n) {
    mem_node *upd[MEM_LEVELS];
    search(l, n->key, n->klen, upd);
    for (int i = 0; i < n->level; i++)
        if (upd[i]->next[i] == n) upd[i]->next[i] = n->next[i];
    if (n->next[0]) n->next[0]->prev = n->prev;
    while (l->level > 1 && !l->head->next[l->level - 1]) l->level--;
    chain_free(n->head);
    free(n);
}

/* ---- versions ------------------------------------------------------------------------- */

mem_ver *mem_ver_new(uint64_t ver, uint64_t serial, uint32_t cid, bool gone, const void *data,
                     size_t len) {
    mem_ver *v = malloc(sizeof *v + len);
    if (!v) return NULL;
    *v = (mem_ver){NULL, ver, serial, cid, gone, len};
    if (len) memcpy(v->data, data, len);
    return v;
}

const mem_ver *mem_see(const mem_node *n, uint64_t ver) {
    const mem_ver *v = n->head;
    while (v && v->ver > ver) v = v->older;
    return v && !v->gone ? v : NULL;
}

bool mem_trim(mem_node *n, uint64_t minv) {
    mem_ver *v = n->head;
    while (v && v->ver > minv) v = v->older;
    if (!v) return false;
    chain_free(v->older); /* no reader at minv or later sees them */
    v->older = NULL;
    return v == n->head && v->gone;
}
