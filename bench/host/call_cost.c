// What a paced launch's fixed parts cost on a host: clock_gettime (MONOTONIC
// and MONOTONIC_COARSE), rdtsc, and the driver's cuCtxGetCurrent (if a
// libcuda.so.1 is found). docs/benchmarks.md, "What a paced launch costs".
//   gcc -O2 -o call_cost bench/host/call_cost.c -ldl && ./call_cost
#include <dlfcn.h>
#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include <x86intrin.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e9+t.tv_nsec;}
int main(void){
  const int n=2000000; struct timespec t; volatile uint64_t sink=0;
  double a=now(); for(int i=0;i<n;i++){clock_gettime(CLOCK_MONOTONIC,&t); sink+=t.tv_nsec;} double b=now();
  printf("clock_gettime(MONOTONIC) %.1f ns\n",(b-a)/n);
  a=now(); for(int i=0;i<n;i++){clock_gettime(CLOCK_MONOTONIC_COARSE,&t); sink+=t.tv_nsec;} b=now();
  printf("clock_gettime(MONOTONIC_COARSE) %.1f ns\n",(b-a)/n);
  a=now(); for(int i=0;i<n;i++){sink+=__rdtsc();} b=now();
  printf("rdtsc %.1f ns\n",(b-a)/n);
  void* h=dlopen("libcuda.so.1",RTLD_NOW);
  if(!h){printf("no libcuda\n");return 0;}
  int (*init)(unsigned)=dlsym(h,"cuInit"); int (*dev)(int*,int)=dlsym(h,"cuDeviceGet");
  int (*ret)(void**,int)=dlsym(h,"cuDevicePrimaryCtxRetain"); int (*setc)(void*)=dlsym(h,"cuCtxSetCurrent");
  int (*getc)(void**)=dlsym(h,"cuCtxGetCurrent");
  int d; void* ctx; init(0); dev(&d,0); ret(&ctx,d); setc(ctx);
  a=now(); for(int i=0;i<n;i++){void* c; getc(&c); sink+=(uintptr_t)c;} b=now();
  printf("cuCtxGetCurrent %.1f ns\n",(b-a)/n);
  return 0;
}
