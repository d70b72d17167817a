import ArgumentParser
@main struct IAP: ParsableCommand { func run() {} }
