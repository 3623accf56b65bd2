/* The adversarial manifest reader (manifest.h), with libyaml's document API. */
#include "manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

static const char *mf_scalar(yaml_document_t *doc, yaml_node_t *map, const char *key) {
  if (!map || map->type != YAML_MAPPING_NODE) return NULL;
  for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
    yaml_node_t *k = yaml_document_get_node(doc, p->key);
    yaml_node_t *v = yaml_document_get_node(doc, p->value);
    if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
      return v && v->type == YAML_SCALAR_NODE ? (const char *)v->data.scalar.value : NULL;
  }
  return NULL;
}

static char *mf_dup(const char *s) {
  return s ? strdup(s) : NULL;
}

void adv_manifest_free(adv_manifest *m) {
  for (int i = 0; i < m->n; i++) {
    adv_run *r = &m->runs[i];
    free(r->name), free(r->file), free(r->plan), free(r->task), free(r->backend);
    free(r->harness), free(r->imports), free(r->expect), free(r->text), free(r->why);
    free(r->absent);
  }
  free(m->runs);
  memset(m, 0, sizeof *m);
}

int adv_manifest_load(const char *path, adv_manifest *m, char *err, size_t errlen) {
  memset(m, 0, sizeof *m);
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errlen, "%s: cannot open", path);
    return -1;
  }
  yaml_parser_t parser;
  yaml_document_t doc;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  int ok = yaml_parser_load(&parser, &doc);
  fclose(f);
  if (!ok) {
    snprintf(err, errlen, "%s:%zu: %s", path, parser.problem_mark.line + 1,
             parser.problem ? parser.problem : "YAML error");
    yaml_parser_delete(&parser);
    return -1;
  }
  yaml_parser_delete(&parser);
  int rc = 0;
  yaml_node_t *root = yaml_document_get_root_node(&doc);
  yaml_node_t *runs = NULL;
  if (root && root->type == YAML_MAPPING_NODE)
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top;
         p++) {
      yaml_node_t *k = yaml_document_get_node(&doc, p->key);
      if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, "runs"))
        runs = yaml_document_get_node(&doc, p->value);
    }
  if (!runs || runs->type != YAML_SEQUENCE_NODE) {
    snprintf(err, errlen, "%s: needs a list 'runs'", path);
    rc = -1;
  }
  size_t cap = runs && runs->type == YAML_SEQUENCE_NODE
                   ? (size_t)(runs->data.sequence.items.top - runs->data.sequence.items.start)
                   : 0;
  m->runs = rc ? NULL : calloc(cap + 1, sizeof *m->runs);
  if (!rc && !m->runs) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  for (size_t i = 0; !rc && i < cap; i++) {
    yaml_node_t *it = yaml_document_get_node(&doc, runs->data.sequence.items.start[i]);
    unsigned long line = it ? (unsigned long)it->start_mark.line + 1 : 0;
    adv_run *r = &m->runs[m->n++];
    r->name = mf_dup(mf_scalar(&doc, it, "name"));
    r->file = mf_dup(mf_scalar(&doc, it, "file"));
    r->plan = mf_dup(mf_scalar(&doc, it, "plan"));
    r->task = mf_dup(mf_scalar(&doc, it, "task"));
    r->backend = mf_dup(mf_scalar(&doc, it, "backend"));
    r->harness = mf_dup(mf_scalar(&doc, it, "harness"));
    r->imports = mf_dup(mf_scalar(&doc, it, "imports"));
    r->expect = mf_dup(mf_scalar(&doc, it, "expect"));
    r->text = mf_dup(mf_scalar(&doc, it, "text"));
    r->absent = mf_dup(mf_scalar(&doc, it, "absent"));
    r->why = mf_dup(mf_scalar(&doc, it, "why"));
    const char *to = mf_scalar(&doc, it, "timeout_s");
    if (!r->imports) r->imports = strdup("task");
    if (to) r->timeout_s = atoi(to);
    if (!r->name || !r->file || !r->task || !r->backend || !r->harness || !r->expect) {
      snprintf(err, errlen, "%s:%lu: a run needs name, file, task, backend, harness, expect", path,
               line);
      rc = -1;
    } else if (strcmp(r->imports, "task") && strcmp(r->imports, "any")) {
      snprintf(err, errlen, "%s:%lu: imports must be task or any", path, line);
      rc = -1;
    } else if (to && r->timeout_s <= 0) {
      snprintf(err, errlen, "%s:%lu: timeout_s must be a positive number of seconds", path, line);
      rc = -1;
    } else if (strpbrk(r->text ? r->text : "", "\t\n") || strpbrk(r->file, "\t\n \"'$`\\")) {
      snprintf(err, errlen, "%s:%lu: no tabs or newlines in text, no blanks or quotes in file",
               path, line);
      rc = -1;
    }
    for (int j = 0; !rc && j < m->n - 1; j++)
      if (!strcmp(m->runs[j].name, r->name)) {
        snprintf(err, errlen, "%s:%lu: name %s is used twice", path, line, r->name);
        rc = -1;
      }
  }
  yaml_document_delete(&doc);
  if (rc) adv_manifest_free(m);
  return rc;
}
