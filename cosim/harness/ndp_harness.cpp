// Fast RTL harness: the Verilated NdpCore, its two clocks, the DRAM it talks to and a host
// driver, run from Python with one call per batch of work ("run until idle").
//
// What it does (cosim/rtl_harness.py is the Python side and documents the API)
//   * Clocks: the NDP clock (NDPH_NDP_PERIOD_PS, 1000 ps) and the DRAM clock
//     (NDPH_DRAM_PERIOD_PS, 625 ps for DDR4-3200), each high for period/2 (rounded down)
//     from t = 0, as cosim/benches/dram_device.start_clocks does; both resets are held
//     for the first 4 NDP rising edges. The model is evaluated at every edge of either
//     clock (edges at the same instant share one evaluation).
//   * DRAM: cosim/benches/dram_device.py's DramDevice, rule for rule, in C++: at every
//     DRAM falling edge it reads the controller's per-rank commands, checks each with the
//     C++ TimingChecker (cosim/harness/dram_model.h; refresh deadlines first, as
//     DramModel.command does, and every 256 idle cycles), keeps data in the SparseStore
//     (addresses from the coordinate with hw/address_map.py's scheme and bank rotation),
//     drives read data on dq_rd exactly tCL cycles after its RD, takes write data from
//     dq_wr exactly CWL cycles after its WR, and checks the controller's data marks
//     (data_valid, dq_wr_en) against those cycles. resp_overflow must stay low.
//   * Host driver (at NDP falling edges, as the cocotb NdpCoreTB does): CSR requests one
//     at a time on the csr stream (reads wait for csr_resp); descriptors staged in
//     DESC0..3 and pushed with DESC_PUSH while fewer than NDPH_DESC_QUEUE are outstanding
//     (pushed and not yet collected, so a push never meets a full queue); when irq is high
//     it reads CQ_HEAD, CQ_CYCLES, CQ_DRAM_BYTES and writes CQ_POP. 64 B pass-through
//     accesses on the host port, responses matched by tag.
//   * Waveforms: built with NDPH_TRACE (a separate library), a VCD of a window of NDP
//     cycles.
//
// Every call returns a status; after an error ndph_error() holds the text. After a DRAM
// timing violation or a protocol error the harness refuses to run further (the design
// state is no longer meaningful): the Python side reports the error and the backend must
// be rebuilt.
#include "harness_config.h"   // generated per build by cosim/rtl_harness.py
#include "dram_model.h"

#include "Vtop.h"
#include "verilated.h"
#ifdef NDPH_TRACE
#include "verilated_vcd_c.h"
#endif

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

double sc_time_stamp() { return 0; }   // Verilator's legacy hook; time is kept in the context

namespace {

enum Status : int32_t {
    NDPH_OK = 0,            // idle: everything submitted has completed
    NDPH_MAX_CYCLES = 1,    // stopped after max_cycles with work still pending
    NDPH_VIOLATION = 2,     // the DRAM timing checker rejected a command
    NDPH_PROTOCOL = 3,      // the design broke the pin protocol the harness checks
    NDPH_VALUE_ERROR = 4,   // bad argument (address, size, register)
    NDPH_DEAD = 5,          // refused: an earlier violation/protocol error stopped the harness
};

// ---- bits of Verilated ports -----------------------------------------------------------
// A port up to 64 bits is an integer; wider ports are VlWide<N> (32-bit words, LSW first).
template <typename T>
inline void port_words(const T& v, uint32_t* w) {
    static_assert(std::is_integral<T>::value, "narrow port");
    uint64_t x = uint64_t(v);
    w[0] = uint32_t(x);
    if (sizeof(T) > 4) w[1] = uint32_t(x >> 32);
}
template <std::size_t N>
inline void port_words(const VlWide<N>& v, uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) w[i] = v[i];
}
template <typename T>
inline void set_port_words(T& p, const uint32_t* w) {
    static_assert(std::is_integral<T>::value, "narrow port");
    uint64_t x = w[0];
    if (sizeof(T) > 4) x |= uint64_t(w[1]) << 32;
    p = T(x);
}
template <std::size_t N>
inline void set_port_words(VlWide<N>& p, const uint32_t* w) {
    for (std::size_t i = 0; i < N; ++i) p[i] = w[i];
}
template <typename T> struct PortWords { static constexpr int n = sizeof(T) > 4 ? 2 : 1; };
template <std::size_t N> struct PortWords<VlWide<N>> { static constexpr int n = int(N); };
#define NDPH_WORDS(port) PortWords<std::decay_t<decltype(port)>>::n

inline uint64_t get_bits(const uint32_t* w, int lsb, int width) {
    uint64_t v = 0;
    for (int done = 0; done < width;) {
        int bit = lsb + done, word = bit >> 5, off = bit & 31;
        int take = std::min(32 - off, width - done);
        uint64_t chunk = (uint64_t(w[word]) >> off) & ((uint64_t(1) << take) - 1);
        v |= chunk << done;
        done += take;
    }
    return v;
}
inline void set_bits(uint32_t* w, int lsb, int width, uint64_t v) {
    for (int done = 0; done < width;) {
        int bit = lsb + done, word = bit >> 5, off = bit & 31;
        int take = std::min(32 - off, width - done);
        uint32_t mask = uint32_t(((uint64_t(1) << take) - 1) << off);
        w[word] = (w[word] & ~mask) | (uint32_t((v >> done) << off) & mask);
        done += take;
    }
}
inline void get_bytes(const uint32_t* w, int lsb, uint8_t* out, int n) {
    for (int i = 0; i < n; ++i) out[i] = uint8_t(get_bits(w, lsb + 8 * i, 8));
}
inline void set_bytes(uint32_t* w, int lsb, const uint8_t* in, int n) {
    for (int i = 0; i < n; ++i) set_bits(w, lsb + 8 * i, 8, in[i]);
}

constexpr int kBurst = 64;
constexpr int kBurstWords = kBurst / 4;

struct CsrOp {
    enum Kind { USER, DESC, CQ_HEAD, CQ_CYCLES, CQ_BYTES, CQ_POP } kind;
    uint32_t addr;
    bool write;
    uint64_t data;
};

struct Completion {
    int64_t head, cycles, dram_bytes, done_cycle;
};

struct HostOp {
    uint64_t id;           // harness-wide sequence number
    bool write;
    int64_t addr;
    uint8_t data[kBurst];
    bool done = false;
};

struct DueRead { int64_t cycle; int rank; uint8_t data[kBurst]; };
struct DueWrite { int64_t cycle; int rank; int64_t addr; };

}  // namespace

struct ndph {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<Vtop> top;
    std::unique_ptr<ndpdram::TimingChecker> checker;
    std::unique_ptr<ndpdram::SparseStore> store;
#ifdef NDPH_TRACE
    std::unique_ptr<VerilatedVcdC> trace;
    int64_t trace_from = 0, trace_to = -1;   // NDP cycles
#endif
    std::string error;
    bool dead = false;

    // time
    int64_t time_ps = 0;
    int64_t next_ndp_edge = 0, next_dram_edge = 0;   // next edge times
    bool ndp_high = false, dram_high = false;          // level after the next edge? see step()
    int64_t ndp_cycle = 0;        // NDP rising edges since reset was released
    int64_t dram_cycle = 0;       // DRAM falling edges since reset was released (checker cycle)
    int reset_edges = 0;
    bool in_reset = true;

    // DRAM device
    std::deque<DueRead> reads_due;
    std::deque<DueWrite> writes_due;
    int64_t counts[6] = {};       // NOP unused; ACT RD WR PRE REF by DramCommand value
    int64_t bursts_read = 0, bursts_written = 0;

    // host driver: CSR
    std::deque<CsrOp> csr_queue;
    bool csr_presented = false, csr_ready_seen = false, csr_wait_resp = false;
    CsrOp csr_current{};
    bool user_done = false;
    uint64_t user_value = 0;
    // descriptors
    std::deque<std::vector<uint64_t>> desc_pending;   // 4 x 64-bit words each
    int64_t pushed = 0, collected = 0;
    bool collecting = false;
    Completion partial{};
    std::vector<Completion> completions;
    // host port
    std::deque<HostOp> host_queue;
    std::unordered_map<uint64_t, HostOp> host_wait;    // by tag
    std::vector<HostOp> host_done;
    uint64_t host_next_id = 0, host_next_tag = 0;
    bool host_presented = false, host_ready_seen = false;
    HostOp host_current{};

    bool csr_busy() const { return csr_presented || csr_wait_resp || !csr_queue.empty(); }
    bool idle() const {
        return desc_pending.empty() && pushed == collected && !collecting && !csr_busy() &&
               host_queue.empty() && host_wait.empty() && !host_presented;
    }
};

namespace {

int32_t fail(ndph* h, int32_t status, std::string msg) {
    h->error = std::move(msg);
    if (status == NDPH_VIOLATION || status == NDPH_PROTOCOL) h->dead = true;
    return status;
}

int64_t encode_address(int64_t rank, int64_t bg, int64_t bank, int64_t row, int64_t column) {
    int64_t bank_field = NDPH_BANK_ROTATE ? ((bank - row) & (NDPH_BANKS_PER_GROUP - 1)) : bank;
    return (column << NDPH_AM_COLUMN_LSB) | (bg << NDPH_AM_BANK_GROUP_LSB) |
           (bank_field << NDPH_AM_BANK_LSB) | (rank << NDPH_AM_RANK_LSB) | (row << NDPH_AM_ROW_LSB);
}

int32_t checker_error(ndph* h) {
    return fail(h, NDPH_VIOLATION, "DRAM timing checker: " + h->checker->message());
}

// One DRAM falling edge: dram_device.py's DramDevice.run loop body.
int32_t dram_fall(ndph* h) {
    Vtop* t = h->top.get();
    const int64_t c = h->dram_cycle;
    uint32_t cmdw[NDPH_WORDS(t->cmd)];
    port_words(t->cmd, cmdw);
    bool any = false;
    for (uint32_t w : cmdw) any |= w != 0;
    if (any) {
        for (int r = 0; r < NDPH_RANKS; ++r) {
            const int base = r * NDPH_CMD_BITS;
            const int kind = int(get_bits(cmdw, base + NDPH_CMD_KIND_LSB, NDPH_CMD_KIND_WIDTH));
            if (kind == NDPH_KIND_NOP) continue;
            const int64_t bg = int64_t(get_bits(cmdw, base + NDPH_CMD_BG_LSB, NDPH_CMD_BG_WIDTH));
            const int64_t bank = int64_t(get_bits(cmdw, base + NDPH_CMD_BANK_LSB, NDPH_CMD_BANK_WIDTH));
            const int64_t row = int64_t(get_bits(cmdw, base + NDPH_CMD_ROW_LSB, NDPH_CMD_ROW_WIDTH));
            const int64_t col = int64_t(get_bits(cmdw, base + NDPH_CMD_COL_LSB, NDPH_CMD_COL_WIDTH));
            if (kind < 0 || kind > 5)
                return fail(h, NDPH_PROTOCOL, "DRAM cycle " + std::to_string(c) + ": rank " +
                            std::to_string(r) + " command kind " + std::to_string(kind) + " undefined");
            h->counts[kind]++;
            if (h->checker->check_refresh(c) != ndpdram::Status::OK) return checker_error(h);
            ndpdram::Status st;
            using ndpdram::Command;
            if (kind == NDPH_KIND_RD) {
                st = h->checker->issue(c, Command::RD, r, bg, bank, row, col);
                if (st != ndpdram::Status::OK) return checker_error(h);
                DueRead d{c + NDPH_T_CL, r, {}};
                if (h->store->read(encode_address(r, bg, bank, row, col), kBurst, d.data) !=
                    ndpdram::Status::OK)
                    return fail(h, NDPH_PROTOCOL, "DRAM store: " + h->store->message());
                h->reads_due.push_back(d);
            } else if (kind == NDPH_KIND_WR) {
                st = h->checker->issue(c, Command::WR, r, bg, bank, row, col);
                if (st != ndpdram::Status::OK) return checker_error(h);
                h->writes_due.push_back(DueWrite{c + NDPH_CWL, r, encode_address(r, bg, bank, row, col)});
            } else if (kind == NDPH_KIND_REF) {
                st = h->checker->issue(c, Command::REF, r);
                if (st != ndpdram::Status::OK) return checker_error(h);
            } else {
                st = h->checker->issue(c, kind == NDPH_KIND_ACT ? Command::ACT : Command::PRE, r, bg,
                                       bank, row);
                if (st != ndpdram::Status::OK) return checker_error(h);
            }
        }
    } else if (c % 256 == 0) {
        if (h->checker->check_refresh(c) != ndpdram::Status::OK) return checker_error(h);
    }
    uint32_t expect = 0;
    for (const DueRead& d : h->reads_due) {
        if (d.cycle != c) break;
        expect |= 1u << d.rank;
    }
    for (const DueWrite& d : h->writes_due) {
        if (d.cycle != c) break;
        expect |= 1u << d.rank;
    }
    const uint32_t marks = uint32_t(t->data_valid);
    if (marks != expect) {
        auto bits = [](uint32_t v) {
            std::string s;
            for (int r = NDPH_RANKS - 1; r >= 0; --r) s += ((v >> r) & 1) ? '1' : '0';
            return s;
        };
        return fail(h, NDPH_PROTOCOL, "DRAM cycle " + std::to_string(c) + ": controller data marks " +
                    bits(marks) + ", DRAM data cycles " + bits(expect));
    }
    if (!h->writes_due.empty() && h->writes_due.front().cycle == c) {
        uint32_t dq[NDPH_WORDS(t->dq_wr)];
        port_words(t->dq_wr, dq);
        const uint32_t wr_en = uint32_t(t->dq_wr_en);
        while (!h->writes_due.empty() && h->writes_due.front().cycle == c) {
            const DueWrite d = h->writes_due.front();
            h->writes_due.pop_front();
            if (!((wr_en >> d.rank) & 1))
                return fail(h, NDPH_PROTOCOL, "DRAM cycle " + std::to_string(c) + ": rank " +
                            std::to_string(d.rank) + " write data not driven");
            uint8_t bytes[kBurst];
            std::memcpy(bytes, dq + d.rank * kBurstWords, kBurst);   // little-endian host
            if (h->store->write(d.addr, bytes, kBurst) != ndpdram::Status::OK)
                return fail(h, NDPH_PROTOCOL, "DRAM store: " + h->store->message());
            h->bursts_written++;
        }
    }
    while (!h->reads_due.empty() && h->reads_due.front().cycle == c) {
        const DueRead& d = h->reads_due.front();
        uint32_t words[kBurstWords];
        std::memcpy(words, d.data, kBurst);
        for (int i = 0; i < kBurstWords; ++i) t->dq_rd[d.rank * kBurstWords + i] = words[i];
        h->bursts_read++;
        h->reads_due.pop_front();
    }
    if (t->resp_overflow)
        return fail(h, NDPH_PROTOCOL, "DRAM cycle " + std::to_string(c) +
                    ": the memory system's response buffer overflowed (resp_overflow)");
    h->dram_cycle = c + 1;
    return NDPH_OK;
}

void csr_enqueue_desc(ndph* h) {
    const std::vector<uint64_t> words = h->desc_pending.front();
    h->desc_pending.pop_front();
    for (int i = 0; i < 4; ++i)
        h->csr_queue.push_back(CsrOp{CsrOp::DESC, uint32_t(NDPH_REG_DESC0 + 8 * i), true, words[i]});
    h->csr_queue.push_back(CsrOp{CsrOp::DESC, NDPH_REG_DESC_PUSH, true, 1});
    h->pushed++;
}

void csr_enqueue_collect(ndph* h) {
    h->collecting = true;
    h->csr_queue.push_back(CsrOp{CsrOp::CQ_HEAD, NDPH_REG_CQ_HEAD, false, 0});
    h->csr_queue.push_back(CsrOp{CsrOp::CQ_CYCLES, NDPH_REG_CQ_CYCLES, false, 0});
    h->csr_queue.push_back(CsrOp{CsrOp::CQ_BYTES, NDPH_REG_CQ_DRAM_BYTES, false, 0});
    h->csr_queue.push_back(CsrOp{CsrOp::CQ_POP, NDPH_REG_CQ_POP, true, 1});
}

// A CSR operation has finished (a write accepted, or a read answered with value).
int32_t csr_finished(ndph* h, const CsrOp& op, uint64_t value) {
    switch (op.kind) {
    case CsrOp::USER: h->user_done = true; h->user_value = value; break;
    case CsrOp::DESC: break;
    case CsrOp::CQ_HEAD:
        if (!(value & 1))
            return fail(h, NDPH_PROTOCOL, "irq was high but CQ_HEAD holds no completion");
        h->partial.head = int64_t(value);
        break;
    case CsrOp::CQ_CYCLES: h->partial.cycles = int64_t(value); break;
    case CsrOp::CQ_BYTES: h->partial.dram_bytes = int64_t(value); break;
    case CsrOp::CQ_POP:
        h->partial.done_cycle = h->ndp_cycle;
        h->completions.push_back(h->partial);
        h->collected++;
        h->collecting = false;
        break;
    }
    return NDPH_OK;
}

// One NDP falling edge: the host driver. Returns whether it changed an input.
int32_t ndp_fall(ndph* h, bool* changed) {
    Vtop* t = h->top.get();
    // the request presented at the last falling edge went in at the rising edge
    if (h->csr_presented && h->csr_ready_seen) {
        h->csr_presented = false;
        if (h->csr_current.write) {
            int32_t st = csr_finished(h, h->csr_current, 0);
            if (st) return st;
        } else {
            h->csr_wait_resp = true;
        }
    }
    // CSR response of a read (possibly in the cycle right after its request) (ready is always 1: it transfers at the next rising edge)
    if (h->csr_wait_resp && t->NDPH_CSR_RESP_VALID) {
        h->csr_wait_resp = false;
        uint32_t w[2];
        port_words(t->NDPH_CSR_RESP_PAYLOAD, w);
        int32_t st = csr_finished(h, h->csr_current, uint64_t(w[0]) | uint64_t(w[1]) << 32);
        if (st) return st;
    }
    // host-port request likewise
    if (h->host_presented && h->host_ready_seen) {
        h->host_presented = false;
        h->host_wait.emplace(h->host_current.id & NDPH_HOST_TAG_MASK, h->host_current);
    }
    // host-port responses (ready always 1)
    for (int r = 0; r < NDPH_RANKS; ++r) {
        if (!NDPH_HOST_RESP_VALID(t, r)) continue;
        uint32_t w[NDPH_HOST_RESP_WORDS];
        NDPH_HOST_RESP_PAYLOAD(t, r, w);
        const uint64_t tag = get_bits(w, NDPH_HRESP_TAG_LSB, NDPH_HRESP_TAG_WIDTH);
        auto it = h->host_wait.find(tag);
        if (it == h->host_wait.end())
            return fail(h, NDPH_PROTOCOL, "host response with unknown tag " + std::to_string(tag));
        HostOp op = it->second;
        h->host_wait.erase(it);
        if (!op.write) get_bytes(w, NDPH_HRESP_DATA_LSB, op.data, kBurst);
        op.done = true;
        h->host_done.push_back(op);
    }
    // decide what the host does next
    if (!h->csr_presented && !h->csr_wait_resp) {
        if (h->csr_queue.empty()) {
            if (t->irq && !h->collecting) csr_enqueue_collect(h);
            else if (!h->desc_pending.empty() && h->pushed - h->collected < NDPH_DESC_QUEUE)
                csr_enqueue_desc(h);
        }
        if (!h->csr_queue.empty()) {
            h->csr_current = h->csr_queue.front();
            h->csr_queue.pop_front();
            uint32_t w[NDPH_WORDS(t->NDPH_CSR_PAYLOAD)] = {};
            set_bits(w, NDPH_CSR_ADDR_LSB, NDPH_CSR_ADDR_WIDTH, h->csr_current.addr);
            set_bits(w, NDPH_CSR_WRITE_LSB, 1, h->csr_current.write);
            set_bits(w, NDPH_CSR_DATA_LSB, 64, h->csr_current.data);
            set_port_words(t->NDPH_CSR_PAYLOAD, w);
            t->NDPH_CSR_VALID = 1;
            h->csr_presented = true;
            *changed = true;
        } else if (t->NDPH_CSR_VALID) {
            t->NDPH_CSR_VALID = 0;
            *changed = true;
        }
    }
    if (!h->host_presented) {
        if (!h->host_queue.empty() && !h->host_wait.count(h->host_queue.front().id & NDPH_HOST_TAG_MASK)) {
            h->host_current = h->host_queue.front();
            h->host_queue.pop_front();
            uint32_t w[NDPH_HOST_REQ_WORDS] = {};
            set_bits(w, NDPH_HREQ_WRITE_LSB, 1, h->host_current.write);
            set_bits(w, NDPH_HREQ_BURST_LSB, NDPH_HREQ_BURST_WIDTH, uint64_t(h->host_current.addr) / kBurst);
            set_bits(w, NDPH_HREQ_TAG_LSB, NDPH_HREQ_TAG_WIDTH, h->host_current.id & NDPH_HOST_TAG_MASK);
            if (h->host_current.write) set_bytes(w, NDPH_HREQ_DATA_LSB, h->host_current.data, kBurst);
            set_port_words(t->NDPH_HOST_REQ_PAYLOAD, w);
            t->NDPH_HOST_REQ_VALID = 1;
            h->host_presented = true;
            *changed = true;
        } else if (t->NDPH_HOST_REQ_VALID) {
            t->NDPH_HOST_REQ_VALID = 0;
            *changed = true;
        }
    }
    return NDPH_OK;
}

void dump_trace(ndph* h) {
#ifdef NDPH_TRACE
    if (h->trace && h->ndp_cycle >= h->trace_from && h->ndp_cycle <= h->trace_to)
        h->trace->dump(uint64_t(h->time_ps));
#else
    (void)h;
#endif
}

// Advance to the next clock edge(s) and evaluate; the device and driver act at falling edges.
int32_t step(ndph* h) {
    Vtop* t = h->top.get();
    const int64_t now = std::min(h->next_ndp_edge, h->next_dram_edge);
    h->time_ps = now;
    h->ctx->time(uint64_t(now));
    bool ndp_rise = false, ndp_fall_edge = false, dram_fall_edge = false;
    if (h->next_ndp_edge == now) {
        h->ndp_high = !h->ndp_high;
        t->clk = h->ndp_high;
        if (h->ndp_high) { ndp_rise = true; h->next_ndp_edge = now + NDPH_NDP_PERIOD_PS / 2; }
        else { ndp_fall_edge = true; h->next_ndp_edge = now + (NDPH_NDP_PERIOD_PS - NDPH_NDP_PERIOD_PS / 2); }
    }
    if (h->next_dram_edge == now) {
        h->dram_high = !h->dram_high;
        t->dram_clk = h->dram_high;
        if (h->dram_high) h->next_dram_edge = now + NDPH_DRAM_PERIOD_PS / 2;
        else { dram_fall_edge = true; h->next_dram_edge = now + (NDPH_DRAM_PERIOD_PS - NDPH_DRAM_PERIOD_PS / 2); }
    }
    t->eval();
    dump_trace(h);
    if (ndp_rise) {
        if (h->in_reset) {
            if (++h->reset_edges == 4) { h->in_reset = false; t->rst = 0; t->dram_rst = 0; }
        } else {
            h->ndp_cycle++;
        }
    }
    if (h->in_reset) return NDPH_OK;
    bool changed = false;
    if (dram_fall_edge) {
        int32_t st = dram_fall(h);
        if (st) return st;
    }
    if (ndp_fall_edge) {
        int32_t st = ndp_fall(h, &changed);
        if (st) return st;
    }
    if (changed) t->eval();   // the driver's new inputs settle before anyone samples them
    if (ndp_fall_edge) {      // what goes in at the next rising edge
        h->csr_ready_seen = h->csr_presented && t->NDPH_CSR_READY;
        h->host_ready_seen = h->host_presented && t->NDPH_HOST_REQ_READY;
    }
    return NDPH_OK;
}

// Run until done() or max_cycles NDP cycles have passed.
template <class Done>
int32_t run_until(ndph* h, int64_t max_cycles, Done done) {
    if (h->dead) return fail(h, NDPH_DEAD, "the harness stopped after an earlier error: " + h->error);
    const int64_t stop = h->ndp_cycle + max_cycles;
    while (!done()) {
        if (h->ndp_cycle >= stop) return NDPH_MAX_CYCLES;
        int32_t st = step(h);
        if (st) return st;
    }
    return NDPH_OK;
}

}  // namespace

extern "C" {

const char* ndph_build_info(void) { return NDPH_BUILD_INFO; }

ndph* ndph_create(char* err, size_t errlen) {
    auto copy = [&](const std::string& msg) {
        if (err && errlen) { std::strncpy(err, msg.c_str(), errlen - 1); err[errlen - 1] = '\0'; }
    };
    try {
        auto h = std::make_unique<ndph>();
        h->ctx = std::make_unique<VerilatedContext>();
        h->ctx->debug(0);
        h->ctx->randReset(0);
#ifdef NDPH_TRACE
        h->ctx->traceEverOn(true);
#endif
        h->top = std::make_unique<Vtop>(h->ctx.get(), "top");
        ndpdram_org org{NDPH_RANKS, NDPH_BANK_GROUPS, NDPH_BANKS_PER_GROUP, NDPH_ROWS_PER_BANK,
                        NDPH_ROW_BYTES, kBurst};
        ndpdram_timing tm{NDPH_TIMING};
        std::string e;
        h->checker = ndpdram::TimingChecker::create(org, tm, &e);
        if (!h->checker) { copy("DRAM timing checker: " + e); return nullptr; }
        h->store = ndpdram::SparseStore::create(NDPH_CAPACITY_BYTES, 4096, &e);
        if (!h->store) { copy("DRAM store: " + e); return nullptr; }
        Vtop* t = h->top.get();
        t->clk = 0; t->dram_clk = 0; t->rst = 1; t->dram_rst = 1;
        t->NDPH_CSR_VALID = 0; t->NDPH_CSR_RESP_READY = 1; t->NDPH_HOST_REQ_VALID = 0;
        NDPH_HOST_RESP_READY_ALL(t);
        t->eval();
        return h.release();
    } catch (const std::exception& ex) {
        copy(std::string("internal error: ") + ex.what());
        return nullptr;
    }
}

void ndph_destroy(ndph* h) {
    if (!h) return;
#ifdef NDPH_TRACE
    if (h->trace) h->trace->close();
#endif
    h->top->final();
    delete h;
}

const char* ndph_error(const ndph* h) { return h->error.c_str(); }

/// Queue n descriptors (4 x 64-bit words each, least significant first).
int32_t ndph_submit(ndph* h, const uint64_t* words, int64_t n) {
    for (int64_t i = 0; i < n; ++i) h->desc_pending.emplace_back(words + 4 * i, words + 4 * i + 4);
    return NDPH_OK;
}

/// Run until idle or max_cycles NDP cycles.
int32_t ndph_run(ndph* h, int64_t max_cycles) {
    return run_until(h, max_cycles, [h] { return h->idle(); });
}

/// Clock the design for n NDP cycles, whatever it is doing (the driver keeps working).
int32_t ndph_run_cycles(ndph* h, int64_t n) {
    const int64_t stop = h->ndp_cycle + n;
    int32_t st = run_until(h, n, [h, stop] { return h->ndp_cycle >= stop; });
    return st == NDPH_MAX_CYCLES ? NDPH_OK : st;
}

/// A register access by the host; runs (work in flight continues) until it completes.
int32_t ndph_csr(ndph* h, uint32_t addr, int32_t write, uint64_t data, uint64_t* out, int64_t max_cycles) {
    h->user_done = false;
    h->csr_queue.push_back(CsrOp{CsrOp::USER, addr, write != 0, data});
    int32_t st = run_until(h, max_cycles, [h] { return h->user_done; });
    if (st == NDPH_MAX_CYCLES)
        return fail(h, NDPH_PROTOCOL, "CSR access to " + std::to_string(addr) + " did not complete in " +
                    std::to_string(max_cycles) + " cycles");
    if (out) *out = h->user_value;
    return st;
}

/// Number of completions collected and not yet taken; take copies up to n of them (oldest
/// first: head, cycles, dram_bytes, done_cycle per entry) and removes them.
int64_t ndph_completions(ndph* h, int64_t* out, int64_t n) {
    int64_t k = std::min<int64_t>(n, int64_t(h->completions.size()));
    for (int64_t i = 0; i < k; ++i) {
        const Completion& c = h->completions[size_t(i)];
        out[4 * i] = c.head; out[4 * i + 1] = c.cycles;
        out[4 * i + 2] = c.dram_bytes; out[4 * i + 3] = c.done_cycle;
    }
    h->completions.erase(h->completions.begin(), h->completions.begin() + k);
    return k;
}

int64_t ndph_pending(const ndph* h) {
    return int64_t(h->desc_pending.size()) + (h->pushed - h->collected);
}

/// One 64 B host pass-through access; runs until it completes. data: 64 bytes in (write) or out (read).
int32_t ndph_host_access(ndph* h, int32_t write, int64_t addr, uint8_t* data, int64_t max_cycles) {
    if (addr < 0 || addr % kBurst || addr + kBurst > NDPH_CAPACITY_BYTES)
        return fail(h, NDPH_VALUE_ERROR, "host access address " + std::to_string(addr) +
                    " is not a 64 B aligned burst inside the DIMM");
    HostOp op{};
    op.id = h->host_next_id++;
    op.write = write != 0;
    op.addr = addr;
    if (op.write) std::memcpy(op.data, data, kBurst);
    const uint64_t id = op.id;
    h->host_queue.push_back(op);
    bool found = false;
    int32_t st = run_until(h, max_cycles, [h, id, &found] {
        for (size_t i = 0; i < h->host_done.size(); ++i)
            if (h->host_done[i].id == id) { found = true; return true; }
        return false;
    });
    if (st == NDPH_MAX_CYCLES)
        return fail(h, NDPH_PROTOCOL, "host access at " + std::to_string(addr) + " did not complete in " +
                    std::to_string(max_cycles) + " cycles");
    if (st) return st;
    for (size_t i = 0; i < h->host_done.size(); ++i) {
        if (h->host_done[i].id != id) continue;
        if (!write) std::memcpy(data, h->host_done[i].data, kBurst);
        h->host_done.erase(h->host_done.begin() + long(i));
        break;
    }
    return NDPH_OK;
}

/// Backdoor into the DRAM store (the host's writes over the memory channel, in zero time).
int32_t ndph_load(ndph* h, int64_t addr, const uint8_t* data, int64_t n) {
    if (h->store->write(addr, data, n) != ndpdram::Status::OK)
        return fail(h, NDPH_VALUE_ERROR, h->store->message());
    return NDPH_OK;
}

int32_t ndph_dump(ndph* h, int64_t addr, uint8_t* out, int64_t n) {
    if (h->store->read(addr, n, out) != ndpdram::Status::OK)
        return fail(h, NDPH_VALUE_ERROR, h->store->message());
    return NDPH_OK;
}

/// out: ndp_cycle, dram_cycle, ACT, RD, WR, PRE, REF, bursts read, bursts written, row hits,
/// row misses, store bytes touched.
void ndph_stats(const ndph* h, int64_t out[12]) {
    ndpdram::Stats s = h->checker->stats();
    out[0] = h->ndp_cycle; out[1] = h->dram_cycle;
    for (int k = 1; k <= 5; ++k) out[1 + k] = h->counts[k];
    out[7] = h->bursts_read; out[8] = h->bursts_written;
    out[9] = s.row_hits; out[10] = s.row_misses; out[11] = h->store->touched_bytes();
}

/// Open a VCD of NDP cycles [from, to] (only in a build with waves; else VALUE_ERROR).
int32_t ndph_trace_open(ndph* h, const char* path, int64_t from, int64_t to) {
#ifdef NDPH_TRACE
    if (h->trace) return fail(h, NDPH_VALUE_ERROR, "a waveform is already open");
    h->trace = std::make_unique<VerilatedVcdC>();
    h->top->trace(h->trace.get(), 99);
    h->trace->set_time_unit("1ps");
    h->trace->set_time_resolution("1ps");
    h->trace->open(path);
    if (!h->trace->isOpen()) {
        h->trace.reset();
        return fail(h, NDPH_VALUE_ERROR, std::string("cannot open waveform file ") + path);
    }
    h->trace_from = from;
    h->trace_to = to;
    return NDPH_OK;
#else
    (void)path; (void)from; (void)to;
    return fail(h, NDPH_VALUE_ERROR, "this harness library was built without waveform support");
#endif
}

void ndph_trace_close(ndph* h) {
#ifdef NDPH_TRACE
    if (h->trace) { h->trace->close(); h->trace.reset(); }
#else
    (void)h;
#endif
}

/// The measurement baseline: only clock the Verilated model for n NDP cycles (both clocks,
/// the same edges as step()), with no DRAM model and no driver. Returns cycles run.
int64_t ndph_bare_clock(ndph* h, int64_t n) {
    Vtop* t = h->top.get();
    const int64_t stop = h->ndp_cycle + n;
    while (h->ndp_cycle < stop) {
        const int64_t now = std::min(h->next_ndp_edge, h->next_dram_edge);
        h->ctx->time(uint64_t(now));
        bool rise = false;
        if (h->next_ndp_edge == now) {
            h->ndp_high = !h->ndp_high;
            t->clk = h->ndp_high;
            rise = h->ndp_high;
            h->next_ndp_edge = now + (h->ndp_high ? NDPH_NDP_PERIOD_PS / 2
                                                   : NDPH_NDP_PERIOD_PS - NDPH_NDP_PERIOD_PS / 2);
        }
        if (h->next_dram_edge == now) {
            h->dram_high = !h->dram_high;
            t->dram_clk = h->dram_high;
            h->next_dram_edge = now + (h->dram_high ? NDPH_DRAM_PERIOD_PS / 2
                                                     : NDPH_DRAM_PERIOD_PS - NDPH_DRAM_PERIOD_PS / 2);
        }
        t->eval();
        if (rise) {
            if (h->in_reset) {
                if (++h->reset_edges == 4) { h->in_reset = false; t->rst = 0; t->dram_rst = 0; }
            } else {
                h->ndp_cycle++;
            }
        }
    }
    h->dead = true;   // the DRAM saw no commands: this instance is only good for measuring
    h->error = "this instance was used for a bare clock measurement";
    return n;
}

}  // extern "C"
