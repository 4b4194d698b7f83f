#!/usr/bin/env python3
"""Per-thread CPU of every `kmirror serve` process, grouped by thread name (digits folded),
written to the file given as argument when the process exits. Used in session 19 beside
`scripts/bench --only kmirror` to split kmirror CPU into librdkafka broker threads, data paths
and the rest (bench/README.md). Samples /proc every 0.3 s: CPU of a thread after its last
sample is missed. Stop it with kill."""
import os,time,sys,re,collections
out=open(sys.argv[1],'a')
seen={}  # (pid,tid)->(comm,ut,st,vcs,ivcs)
def pids():
    r=[]
    for p in os.listdir('/proc'):
        if not p.isdigit(): continue
        try: c=open(f'/proc/{p}/cmdline','rb').read()
        except OSError: continue
        if b'kmirror\x00serve' in c: r.append(p)
    return r
live=set()
while True:
    cur=set(pids())
    for p in cur:
        try: tids=os.listdir(f'/proc/{p}/task')
        except OSError: continue
        for t in tids:
            try:
                s=open(f'/proc/{p}/task/{t}/stat').read()
                st=open(f'/proc/{p}/task/{t}/status').read()
            except OSError: continue  # the thread or process just ended
            comm=s[s.index('(')+1:s.rindex(')')]
            f=s[s.rindex(')')+2:].split()
            ut,stt=int(f[11]),int(f[12])
            v=int(re.search(r'^voluntary_ctxt_switches:\s+(\d+)',st,re.M).group(1))
            n=int(re.search(r'^nonvoluntary_ctxt_switches:\s+(\d+)',st,re.M).group(1))
            seen[(p,t)]=(comm,ut,stt,v,n)
    for p in live-cur:
        g=collections.defaultdict(lambda:[0,0,0,0,0])
        for (pp,t),(comm,ut,stt,v,n) in seen.items():
            if pp!=p: continue
            k=re.sub(r'\d+','N',comm)
            a=g[k]; a[0]+=ut; a[1]+=stt; a[2]+=v; a[3]+=n; a[4]+=1
        tot=[sum(x[i] for x in g.values()) for i in range(5)]
        out.write(f'pid {p} total user {tot[0]/100:.2f} sys {tot[1]/100:.2f} vcs {tot[2]} ivcs {tot[3]} threads {tot[4]}\n')
        for k,a in sorted(g.items(),key=lambda kv:-(kv[1][0]+kv[1][1])):
            out.write(f'   {k:28s} user {a[0]/100:7.2f} sys {a[1]/100:7.2f} vcs {a[2]:8d} ivcs {a[3]:7d} n {a[4]}\n')
        out.flush()
        # An exited process's threads are reported once and forgotten (pids are reused).
        seen={k:v for k,v in seen.items() if k[0]!=p}
    live=cur
    time.sleep(0.3)
