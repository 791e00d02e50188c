#include <cstdio>
int main() { std::puts("grove"); return 0; }
