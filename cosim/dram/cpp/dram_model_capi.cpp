// C ABI of the C++ DRAM model (declared at the end of dram_model.h), for ctypes
// (cosim/dram/native.py). Every entry point catches everything: a C++ exception
// (only std::bad_alloc is possible) becomes NDPDRAM_INTERNAL_ERROR with its message.
#include "dram_model.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>
#include <string>

struct ndpdram_checker {
    std::unique_ptr<ndpdram::TimingChecker> impl;
    int32_t last = NDPDRAM_OK;      // status of the last call that can fail
    std::string internal;           // message of an NDPDRAM_INTERNAL_ERROR
};

struct ndpdram_store {
    std::unique_ptr<ndpdram::SparseStore> impl;
    int32_t last = NDPDRAM_OK;
    std::string internal;
};

namespace {

using ndpdram::Arg;
using ndpdram::arg_opt;

void copy_error(const std::string& msg, char* err, size_t errlen) {
    if (!err || !errlen) return;
    size_t n = std::min(msg.size(), errlen - 1);
    std::memcpy(err, msg.data(), n);
    err[n] = '\0';
}

std::string what_of(std::exception_ptr p) {
    try {
        std::rethrow_exception(p);
    } catch (const std::bad_alloc&) {
        return "internal error: out of memory";
    } catch (const std::exception& e) {
        return std::string("internal error: ") + e.what();
    } catch (...) {
        return "internal error: unknown exception";
    }
}

// Runs f (returning ndpdram::Status) on handle h, recording the outcome.
template <class H, class F>
int32_t guarded(H* h, F&& f) {
    if (!h) return NDPDRAM_INTERNAL_ERROR;
    h->internal.clear();
    try {
        h->last = int32_t(f());
    } catch (...) {
        h->internal = what_of(std::current_exception());
        h->last = NDPDRAM_INTERNAL_ERROR;
    }
    return h->last;
}

const Arg kNoneArg = ndpdram::arg_none();

const Arg& arg_at(const ndpdram_arg* args, int i) { return args ? args[i] : kNoneArg; }

}  // namespace

extern "C" {

int32_t ndpdram_abi_version(void) { return NDPDRAM_ABI_VERSION; }

const char* ndpdram_command_name(int32_t command) { return ndpdram::command_name(command); }

const char* ndpdram_constraint_name(int32_t constraint) {
    return ndpdram::constraint_name(constraint);
}

int32_t ndpdram_num_constraints(void) { return ndpdram::kNumConstraints; }

// ---- checker ----------------------------------------------------------------------------------

ndpdram_checker* ndpdram_checker_create(const ndpdram_org* org, const ndpdram_timing* timing,
                                        char* err, size_t errlen) {
    try {
        if (!org || !timing) {
            copy_error("organisation and timing are required", err, errlen);
            return nullptr;
        }
        std::string error;
        auto impl = ndpdram::TimingChecker::create(*org, *timing, &error);
        if (!impl) {
            copy_error(error, err, errlen);
            return nullptr;
        }
        auto* h = new ndpdram_checker;
        h->impl = std::move(impl);
        return h;
    } catch (...) {
        copy_error(what_of(std::current_exception()), err, errlen);
        return nullptr;
    }
}

void ndpdram_checker_destroy(ndpdram_checker* h) { delete h; }

int32_t ndpdram_checker_issue(ndpdram_checker* h, int32_t command, int64_t cycle, int64_t rank,
                              int64_t bank_group, int64_t bank, int64_t row, int64_t column) {
    return guarded(h, [&] {
        return h->impl->issue(command, ndpdram::arg_int(cycle), arg_opt(rank), arg_opt(bank_group),
                              arg_opt(bank), arg_opt(row), arg_opt(column));
    });
}

int32_t ndpdram_checker_issue_args(ndpdram_checker* h, int32_t command, const char* command_repr,
                                   const ndpdram_arg* cycle, const ndpdram_arg* args) {
    return guarded(h, [&] {
        return h->impl->issue(command, cycle ? *cycle : kNoneArg, arg_at(args, 0), arg_at(args, 1),
                              arg_at(args, 2), arg_at(args, 3), arg_at(args, 4), command_repr);
    });
}

int32_t ndpdram_checker_earliest(ndpdram_checker* h, int32_t command, int64_t rank,
                                 int64_t bank_group, int64_t bank, int64_t row, int64_t column,
                                 int64_t* out) {
    return guarded(h, [&] {
        int64_t ignored;
        return h->impl->earliest_cycle(command, arg_opt(rank), arg_opt(bank_group), arg_opt(bank),
                                       arg_opt(row), arg_opt(column), out ? out : &ignored);
    });
}

int32_t ndpdram_checker_earliest_args(ndpdram_checker* h, int32_t command, const char* command_repr,
                                      const ndpdram_arg* args, int64_t* out) {
    return guarded(h, [&] {
        int64_t ignored;
        return h->impl->earliest_cycle(command, arg_at(args, 0), arg_at(args, 1), arg_at(args, 2),
                                       arg_at(args, 3), arg_at(args, 4), out ? out : &ignored,
                                       command_repr);
    });
}

int32_t ndpdram_checker_check_refresh(ndpdram_checker* h, int64_t cycle, int64_t rank) {
    return guarded(h, [&] { return h->impl->check_refresh(ndpdram::arg_int(cycle), arg_opt(rank)); });
}

int32_t ndpdram_checker_check_refresh_args(ndpdram_checker* h, const ndpdram_arg* cycle,
                                           const ndpdram_arg* rank) {
    return guarded(h, [&] {
        return h->impl->check_refresh(cycle ? *cycle : kNoneArg, rank ? *rank : kNoneArg);
    });
}

int32_t ndpdram_checker_error(const ndpdram_checker* h, ndpdram_error* out) {
    if (!h || !out || h->last != NDPDRAM_VIOLATION) return -1;
    const ndpdram::Violation& v = h->impl->violation();
    out->command = v.command;
    out->constraint = int32_t(v.constraint);
    out->cycle = v.cycle;
    out->rank_kind = v.rank.kind;
    out->bank_group_kind = v.bank_group.kind;
    out->bank_kind = v.bank.kind;
    out->rank = v.rank.value;
    out->bank_group = v.bank_group.value;
    out->bank = v.bank.value;
    out->has_earliest = v.has_earliest ? 1 : 0;
    out->earliest = v.earliest;
    out->n_others = int32_t(v.others.size());
    return 0;
}

int32_t ndpdram_checker_error_other(const ndpdram_checker* h, int32_t i, int32_t* constraint,
                                    int64_t* earliest) {
    if (!h || h->last != NDPDRAM_VIOLATION) return -1;
    const auto& others = h->impl->violation().others;
    if (i < 0 || size_t(i) >= others.size()) return -1;
    if (constraint) *constraint = int32_t(others[size_t(i)].first);
    if (earliest) *earliest = others[size_t(i)].second;
    return 0;
}

const char* ndpdram_checker_error_field_text(const ndpdram_checker* h, int32_t which) {
    if (!h || h->last != NDPDRAM_VIOLATION) return "";
    const ndpdram::Violation& v = h->impl->violation();
    const ndpdram::Field* f = which == 0 ? &v.rank : which == 1 ? &v.bank_group : which == 2 ? &v.bank : nullptr;
    return f ? f->text.c_str() : "";
}

const char* ndpdram_checker_error_detail(const ndpdram_checker* h) {
    if (!h || h->last != NDPDRAM_VIOLATION) return "";
    return h->impl->violation().detail.c_str();
}

const char* ndpdram_checker_error_message(const ndpdram_checker* h) {
    if (!h) return "no checker";
    if (h->last == NDPDRAM_OK) return "";
    if (h->last == NDPDRAM_INTERNAL_ERROR) return h->internal.c_str();
    return h->impl->message().c_str();
}

void ndpdram_checker_stats(const ndpdram_checker* h, int64_t out[9]) {
    if (!h || !out) return;
    ndpdram::Stats s = h->impl->stats();
    for (int i = 0; i < ndpdram::kNumCommands; ++i) out[i] = s.commands[i];
    out[6] = s.row_hits;
    out[7] = s.row_misses;
    out[8] = s.refreshes;
}

int64_t ndpdram_checker_cycle(const ndpdram_checker* h) { return h ? h->impl->cycle() : 0; }

int32_t ndpdram_checker_open_row(const ndpdram_checker* h, int64_t rank, int64_t bank_group,
                                 int64_t bank, int64_t* row) {
    if (!h) return -1;
    const ndpdram_org& o = h->impl->org();
    if (rank < 0 || rank >= o.ranks || bank_group < 0 || bank_group >= o.bank_groups || bank < 0 ||
        bank >= o.banks_per_group)
        return -1;
    return h->impl->open_row(rank, bank_group, bank, row) ? 1 : 0;
}

// ---- store ------------------------------------------------------------------------------------

ndpdram_store* ndpdram_store_create(int64_t capacity_bytes, int64_t page_bytes, char* err,
                                    size_t errlen) {
    try {
        std::string error;
        auto impl = ndpdram::SparseStore::create(capacity_bytes, page_bytes, &error);
        if (!impl) {
            copy_error(error, err, errlen);
            return nullptr;
        }
        auto* s = new ndpdram_store;
        s->impl = std::move(impl);
        return s;
    } catch (...) {
        copy_error(what_of(std::current_exception()), err, errlen);
        return nullptr;
    }
}

void ndpdram_store_destroy(ndpdram_store* s) { delete s; }

int32_t ndpdram_store_read(ndpdram_store* s, int64_t addr, int64_t n, uint8_t* out) {
    return guarded(s, [&] { return s->impl->read(addr, n, out); });
}

int32_t ndpdram_store_write(ndpdram_store* s, int64_t addr, const uint8_t* data, int64_t n) {
    return guarded(s, [&] { return s->impl->write(addr, data, n); });
}

int64_t ndpdram_store_touched_bytes(const ndpdram_store* s) {
    return s ? s->impl->touched_bytes() : 0;
}

const char* ndpdram_store_error_message(const ndpdram_store* s) {
    if (!s) return "no store";
    if (s->last == NDPDRAM_OK) return "";
    if (s->last == NDPDRAM_INTERNAL_ERROR && !s->internal.empty()) return s->internal.c_str();
    return s->impl->message().c_str();
}

}  // extern "C"
